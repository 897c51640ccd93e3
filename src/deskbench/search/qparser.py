"""Query strings parsed the way MADQA's official search tool parses them.

The official tool is `whoosh.qparser.QueryParser("text", schema)` with its default plugins
(whoosh 2.7.4): it never refuses a query. It tags the string (phrases, parentheses, AND / OR /
ANDNOT / ANDMAYBE / REQUIRE / NOT, field:, wildcards, ^boost, single-quoted words), groups by
parentheses, then applies the operators to their neighbours, NOT first, then AND, OR, ANDNOT,
ANDMAYBE, REQUIRE; what is left side by side is ANDed. Whatever does not fit is repaired or
dropped, as there:

- an unbalanced `"` is an ordinary character (the words around it are searched as words);
- a `)` with no `(` is dropped; an unclosed `(` runs to the end of the query;
- an operator without a neighbour is dropped (`permit AND`, `OR permit`); AND / OR / ANDNOT /
  ANDMAYBE / REQUIRE are operators only with whitespace on both sides and NOT only at the start
  or after whitespace or a parenthesis, with whitespace after it: elsewhere they are the words
  "and", "or", "not" (stop words);
- `NOT x` alone matches every page without x; `*` (or `*:*`) matches every page, and Whoosh's
  normalisation lets it swallow the other words of its group (`building *` = every page);
- `name:` applies to the next word only for the schema's fields (text, file, page_number,
  total_pages); another name is part of the word (`foo:bar` = foo bar);
- `^2` boosts the clause before it; `"a b"~3` lets the phrase's words be up to 3 apart;
- a word that the analyzer splits is the AND of its pieces (`2015/16` = 2015 AND 16);
- a wildcard's text is lower-cased and not analysed (`l'entre*` is the prefix "l'entre", which
  no term starts with); with only a final `*` it is a prefix; without `*` or `?` (Whoosh's other
  question marks are wildcards to its parser, not to its Wildcard query) it is that term;
- where Whoosh itself fails (`NOT NOT x` raises IndexError), the empty NOT is dropped.

Term ranges (`[a TO b]`) are not parsed: the brackets are ordinary characters. A wildcard or a
quote inside a phrase is an ordinary character, as in Whoosh (`"annual rep*"` is the phrase
"annual rep"); curly quotes are ordinary characters too. A phrase's stop words are dropped and
the words left must follow each other, as Whoosh numbers positions without the stop words.

Each repair is recorded as a Problem; `deskbench search` (strict) reports the first one.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from deskbench.errors import is_one_of
from deskbench.search.analyzer import analyze
from deskbench.search.nodes import (
    FIELDS,
    NULL,
    And,
    AndMaybe,
    AndNot,
    Empty,
    Every,
    FieldName,
    FieldTerm,
    Node,
    Not,
    Null,
    Or,
    Phrase,
    Require,
    Term,
    Wildcard,
    normalize,
)

if TYPE_CHECKING:  # typing.TypeIs is Python 3.13's; only mypy reads it here
    from typing_extensions import TypeIs


@dataclass(frozen=True)
class Problem:
    """Something Whoosh would repair or drop without a word; pos is 0-based in the query."""

    pos: int
    message: str


# -- tagging -------------------------------------------------------------------------------------

_QUOTES = '"'
_QMARKS = "?\u055e\u061f\u1367"  # Whoosh's wildcard question marks
_OPERATORS = ("ANDNOT", "ANDMAYBE", "NOT", "AND", "OR", "REQUIRE")

# One alternation in Whoosh's tagger order (priority, then plugin order): at each position the
# first alternative that matches wins, and the text between matches is a word. `search` from a
# position finds the same next match as trying every position in turn.
_TAGGER = re.compile(
    r"(?P<ANDNOT>(?<=\s)ANDNOT(?=\s))"
    r"|(?P<ANDMAYBE>(?<=\s)ANDMAYBE(?=\s))"
    r"|(?P<EVERY>[*]:[*])"
    r"|(?P<SQUOTE>(?:^|(?<=\W))'(?P<sq_text>.*?)'(?=\s|\]|[)}]|$))"
    r"|(?P<FIELD>(?P<f_name>\w+|[*]):)"
    rf"|(?P<WILD>[*{_QMARKS}])"
    rf"|(?P<PHRASE>[{_QUOTES}](?P<p_text>.*?)[{_QUOTES}](?:~(?P<p_slop>[1-9][0-9]*))?)"
    r"|(?P<OPEN>[(])"
    r"|(?P<CLOSE>[)])"
    r"|(?P<NOT>(?:^|(?<=[\s()]))NOT(?=\s))"
    r"|(?P<AND>(?<=\s)AND(?=\s))"
    r"|(?P<OR>(?<=\s)OR(?=\s))"
    r"|(?P<REQUIRE>(?:^|(?<=\s))REQUIRE(?=\s))"
    r"|(?P<BOOST>\^(?P<b_value>[0-9]*(?:\.[0-9]+)?)(?:$|(?=[ \t\r\n)])))"
    r"|(?P<WS>\s+)"
    rf"|(?P<RUN>(?:(?!\w+:)[^\s{_QUOTES}'()*^{_QMARKS}])+)"
)
"""RUN, tried last, is a stretch of characters none of the others can start a match in (they
all begin with one of the characters it stops at, need whitespace or a parenthesis before
them, or are a field name, which it stops before): the text of a word, read in one step."""


@dataclass
class _Text:
    """A word, phrase or wildcard (Whoosh's TextNode); kind: word, phrase, wild, prefix."""

    kind: str
    text: str
    pos: int
    slop: int = 1
    field: FieldName | None = None
    boost: float = 1.0


@dataclass
class _Mark:
    """Whitespace, a parenthesis, an operator, `*:*`, a field name or a boost."""

    kind: str  # WS, OPEN, CLOSE, EVERY, FIELD, BOOST, or an operator name
    pos: int
    original: str = ""
    value: float = 1.0  # a boost's factor
    name: str = ""  # a field's name


@dataclass
class _Group:
    kind: str  # and, or, not, andnot, andmaybe, require
    nodes: list[_Item] = field(default_factory=list)
    boost: float = 1.0
    pos: int = 0


_Item = _Text | _Mark | _Group


def _tag(query: str) -> list[_Item]:
    items: list[_Item] = []
    prev = 0

    def word(end: int) -> None:
        if prev < end:
            items.append(_Text("word", query[prev:end], prev))

    for m in _TAGGER.finditer(query):
        kind = m.lastgroup
        if kind == "RUN":
            continue
        word(m.start())
        if m.group("SQUOTE") is not None:
            items.append(_Text("word", m.group("sq_text"), m.start()))
        elif kind == "FIELD":
            items.append(_Mark("FIELD", m.start(), m.group(0), name=m.group("f_name")))
        elif kind == "WILD":
            items.append(_Text("wild", m.group(0), m.start()))
        elif m.group("PHRASE") is not None:
            slop = int(m.group("p_slop")) if m.group("p_slop") else 1
            items.append(_Text("phrase", m.group("p_text"), m.start(), slop=slop))
        elif m.group("BOOST") is not None:
            try:
                items.append(_Mark("BOOST", m.start(), m.group(0), value=float(m.group("b_value"))))
            except ValueError:  # `^` with no number: a word
                items.append(_Text("word", m.group(0), m.start()))
        else:
            assert kind is not None
            items.append(_Mark(kind, m.start(), m.group(0)))
        prev = m.end()
    word(len(query))
    return items


# -- the filters, in Whoosh's order ----------------------------------------------------------------


@dataclass
class _Parse:
    query: str
    problems: list[Problem] = field(default_factory=list)

    def problem(self, pos: int, message: str) -> None:
        self.problems.append(Problem(pos, message))

    def groups(self, items: list[_Item]) -> _Group:
        """Parentheses: a `)` with no `(` is dropped; an unclosed `(` is flattened into the top."""
        stack = [_Group("and")]
        opened: list[int] = []
        for item in items:
            if isinstance(item, _Mark) and item.kind == "OPEN":
                stack.append(_Group("and", pos=item.pos))
                opened.append(item.pos)
            elif isinstance(item, _Mark) and item.kind == "CLOSE":
                if len(stack) > 1:
                    last = stack.pop()
                    opened.pop()
                    stack[-1].nodes.append(last)
                else:
                    self.problem(item.pos, f"unbalanced parenthesis at position {item.pos + 1}: "
                                           "remove the ')' or add a '('")
            else:
                stack[-1].nodes.append(item)
        top = stack[0]
        for pos in opened:
            self.problem(pos, f"unbalanced parenthesis at position {pos + 1}: add the closing ')'")
        for level in stack[1:]:
            top.nodes.extend(level.nodes)
        if len(top.nodes) == 1 and isinstance(top.nodes[0], _Group):
            top.nodes[0].boost = top.boost
            top = top.nodes[0]
        return top

    @staticmethod
    def clean_boost(group: _Group) -> None:
        """A boost with nothing boostable before it is a word (top level only, as in Whoosh)."""
        for i, item in enumerate(group.nodes):
            if isinstance(item, _Mark) and item.kind == "BOOST" and (i == 0 or not _boostable(group.nodes[i - 1])):
                group.nodes[i] = _Text("word", item.original, item.pos)

    def wildcards(self, group: _Group) -> None:
        """A `*` or `?` joins the text right next to it; `text*` alone is a prefix."""
        nodes = group.nodes
        i = 0
        while i < len(nodes):
            item = nodes[i]
            if isinstance(item, _Text) and item.kind == "wild":
                after = nodes[i + 1] if i < len(nodes) - 1 else None
                if isinstance(after, _Text):
                    item.text += after.text
                    del nodes[i + 1]
                before = nodes[i - 1] if i > 0 else None
                if isinstance(before, _Text):
                    del nodes[i - 1]
                    item.text = before.text + item.text
                    item.pos = before.pos
                else:
                    i += 1
            else:
                if isinstance(item, _Group):
                    self.wildcards(item)
                i += 1
        for item in nodes:
            if isinstance(item, _Text) and item.kind == "wild":
                text = item.text
                if len(text) > 1 and not any(q in text for q in _QMARKS) and text.find("*") == len(text) - 1:
                    item.kind, item.text = "prefix", text[:-1]

    def fieldnames(self, group: _Group) -> _Group:
        """`field:` applies to the next item for the schema's fields; another name is text."""
        kept: list[_Item] = []
        unknown: _Mark | None = None
        for item in group.nodes:
            if isinstance(item, _Mark) and item.kind == "FIELD" and item.name not in FIELDS:
                unknown = item
                continue
            if unknown is not None:
                if isinstance(item, _Text):
                    item.text = unknown.original + item.text
                    item.pos = unknown.pos
                else:
                    kept.append(_Text("word", unknown.original, unknown.pos))
                unknown = None
            kept.append(item)
        if unknown is not None:
            kept.append(_Text("word", unknown.original, unknown.pos))
        out: list[_Item] = []
        i = len(kept)
        while i > 0:
            i -= 1
            item = kept[i]
            if isinstance(item, _Mark) and item.kind == "FIELD":
                item = _Text("word", item.original, item.pos)
            elif isinstance(item, _Group):
                item = self.fieldnames(item)
            before = kept[i - 1] if i > 0 else None
            if (isinstance(before, _Mark) and before.kind == "FIELD" and is_one_of(before.name, FIELDS)
                    and not (isinstance(item, _Mark) and item.kind == "WS")):  # (the other names were read as text above)
                _set_field(item, before.name)
                i -= 1
            out.append(item)
        out.reverse()
        group.nodes = out
        return group

    def whitespace(self, group: _Group) -> None:
        group.nodes = [n for n in group.nodes if not (isinstance(n, _Mark) and n.kind == "WS")]
        for n in group.nodes:
            if isinstance(n, _Group):
                self.whitespace(n)

    def boosts(self, group: _Group) -> None:
        kept: list[_Item] = []
        for item in group.nodes:
            if isinstance(item, _Group):
                self.boosts(item)
            elif isinstance(item, _Mark) and item.kind == "BOOST":
                if kept and _boostable(last := kept[-1]):
                    last.boost = item.value
                    continue
                item = _Text("word", item.original, item.pos)
            kept.append(item)
        group.nodes = kept

    def operators(self, group: _Group) -> _Group:
        nodes = group.nodes
        for op in ("NOT", "AND", "OR", "ANDNOT", "ANDMAYBE", "REQUIRE"):
            i = 0
            while i < len(nodes):
                item = nodes[i]
                if not (isinstance(item, _Mark) and item.kind == op):
                    i += 1
                    continue
                if op == "NOT":  # prefix: wraps the next item
                    length = len(nodes)
                    del nodes[i]
                    if i < length - 1:
                        nodes[i] = _Group("not", [nodes[i]], pos=item.pos)
                    else:
                        self.problem(item.pos, _needs_after(op, item.pos))
                elif 0 < i < len(nodes) - 1:  # infix, left-associative
                    left, right = nodes[i - 1], nodes[i + 1]
                    if isinstance(right, _Mark) and right.kind in _OPERATORS:
                        self.problem(item.pos, _needs_after(op, item.pos))
                    kind = op.lower()
                    if kind in ("and", "or") and isinstance(left, _Group) and left.kind == kind:
                        left.nodes.append(right)
                        del nodes[i:i + 2]
                    else:
                        nodes[i - 1:i + 2] = [_Group(kind, [left, right], pos=left.pos)]
                else:
                    self.problem(item.pos, _needs_before(op, item.pos) if i == 0 else _needs_after(op, item.pos))
                    del nodes[i]
        for i, item in enumerate(nodes):
            if isinstance(item, _Group):
                nodes[i] = self.operators(item)
        return group

    # -- to query nodes ----------------------------------------------------------------------------

    def to_node(self, item: _Item) -> Node | None:
        if isinstance(item, _Group):
            return self.group_node(item)
        if isinstance(item, _Text):
            return self.text_node(item)
        if item.kind == "EVERY":
            return Every(None)
        if item.kind in _OPERATORS:  # an operator inside a group left for another pass
            self.problem(item.pos, _needs_after(item.kind, item.pos))
        return None

    def group_node(self, group: _Group) -> Node | None:
        if group.kind == "not":
            if not group.nodes:  # NOT NOT x: Whoosh raises IndexError here
                return None
            child = self.to_node(group.nodes[0])
            if child is None or isinstance(child, Null):
                return None
            return Not(child, group.boost)
        if group.kind in ("andnot", "andmaybe", "require"):
            parts = [self.to_node(n) for n in group.nodes]
            if len(parts) != 2:  # `a ANDNOT ANDNOT b` leaves one (Whoosh fails an assert)
                return next((q for q in parts if q is not None), NULL)
            a, b = parts
            if a is None or b is None:
                return a or b or NULL
            if group.kind == "andnot":
                return AndNot(a, b)
            return AndMaybe(a, b) if group.kind == "andmaybe" else Require(a, b)
        subs = [q for q in (self.to_node(n) for n in group.nodes) if q is not None]
        if group.kind == "or":
            return Or(tuple(subs), group.boost)
        return And(tuple(subs), group.boost)

    def text_node(self, item: _Text) -> Node | None:
        name = item.field or "text"
        if item.kind in ("wild", "prefix"):
            return _pattern(item, name)
        if name == "file":
            return FieldTerm("file", item.text, boost=item.boost)
        if name in ("page_number", "total_pages"):
            try:
                return FieldTerm(name, int(item.text), boost=item.boost)
            except ValueError:
                return Empty()
        if item.kind == "phrase":
            return _phrase(item)
        terms = analyze(item.text)
        if not terms:
            return None
        if len(terms) == 1:
            return Term(terms[0], item.boost)
        return And(tuple(Term(t, item.boost) for t in terms))  # Whoosh's multi-token word


def _boostable(item: _Item) -> TypeIs[_Text | _Group]:
    return isinstance(item, _Text | _Group) and not (isinstance(item, _Group) and item.kind in ("andnot", "andmaybe", "require"))


def _set_field(item: _Item, name: FieldName) -> None:
    if isinstance(item, _Text):
        if item.field is None:
            item.field = name
    elif isinstance(item, _Group):
        for child in item.nodes:
            _set_field(child, name)


def _needs_before(op: str, pos: int) -> str:
    return f"{op} at position {pos + 1} needs a term before it"


def _needs_after(op: str, pos: int) -> str:
    example = " e.g. 'budget NOT draft'" if op == "NOT" else ""
    return f"{op} at position {pos + 1} needs a term after it{example}"


_WILD_SPLIT = re.compile(rf"([*{_QMARKS}])")


_WILDCARD_SPECIALS = "*?["  # whoosh.query.Wildcard.SPECIAL_CHARS: where its literal prefix ends


def text_pattern(text: str, boost: float = 1.0, *, prefix: bool = False) -> Node:
    """Whoosh's Prefix or Wildcard query for the (lower-cased) text of a wildcard in the text
    field, normalised as Whoosh normalises it."""
    if prefix and not text:
        return Every("text", boost)  # Prefix.matcher of "": Every
    if prefix:
        return Wildcard(text + "*", re.escape(text) + "(?s:.*)", boost, literal=text, prefix=True)
    if text == "*":
        return Every("text", boost)
    if "*" not in text and "?" not in text:
        return Term(text, boost)  # e.g. a word with an Armenian question mark: that very term
    if "?" not in text and text.find("*") == len(text) - 1:
        return text_pattern(text[:-1], boost, prefix=True)
    cut = min((i for i in (text.find(c) for c in _WILDCARD_SPECIALS) if i >= 0), default=len(text) - 1)
    return Wildcard(text, fnmatch.translate(text), boost, literal=text[:cut])


def _pattern(item: _Text, name: FieldName) -> Node | None:
    text = item.text + ("*" if item.kind == "prefix" else "")
    if text == "*":
        return Every(name, item.boost)
    if name == "file":
        parts = [p for p in _WILD_SPLIT.split(text) if p]
        names = "".join(".*" if p == "*" else "." if p in _QMARKS else re.escape(p) for p in parts)
        return FieldTerm("file", names, regex=True, boost=item.boost)
    if name != "text":  # a number field parses the text before the `*` as the number
        try:
            return FieldTerm(name, int(item.text), boost=item.boost) if item.kind == "prefix" else Empty()
        except ValueError:
            return Empty()
    # not analysed: lower-cased only (Whoosh's analyzer with tokenize=False, which keeps the word)
    return text_pattern(item.text.lower(), item.boost, prefix=item.kind == "prefix")


def _phrase(item: _Text) -> Node:
    """A phrase's words, its stop words dropped (Whoosh's positions skip them too)."""
    words = analyze(item.text)
    if not words:
        return NULL
    return Phrase(tuple(Term(t) for t in words), item.slop, item.boost)


_FAST_TOKEN = re.compile(
    rf'(?P<phrase>{_QUOTES}(?P<text>[^{_QUOTES}]*){_QUOTES}(?:~(?P<slop>[1-9][0-9]*))?)(?=\s|$)'
    rf"|(?P<word>[^\s{_QUOTES}'()*:^~{_QMARKS}]+)(?P<star>\*?)(?=\s|$)"
    r"|(?P<other>\S+)"
)
_FastNode = tuple[Literal["node"], Node | None]
_FastOp = tuple[Literal["op"], str]  # AND, OR, NOT
_FastGroup = tuple[Literal["not", "and", "or"], list["_FastItem"]]
_FastItem = _FastNode | _FastOp | _FastGroup
_JOINS: tuple[tuple[str, Literal["and", "or"]], ...] = (("AND", "and"), ("OR", "or"))


def _fast(query: str) -> Node | None:
    """The tree of a query made only of words, `word*` prefixes, "phrases" (with ~slop) and
    the operators AND, OR and NOT between them (nearly every agent query), built without the
    tagger and its passes; None for anything else, a query the full parse would repair, or
    one with nothing searchable (the full parse then says what)."""
    items: list[_FastItem] = []
    for m in _FAST_TOKEN.finditer(query):
        if m.group("other") is not None or m.group(0) in _OPERATORS:
            if m.group(0) not in ("AND", "OR", "NOT"):
                return None
            items.append(("op", m.group(0)))
        elif m.group("phrase") is not None:
            slop = int(m.group("slop")) if m.group("slop") else 1
            items.append(("node", _phrase(_Text("phrase", m.group("text"), m.start(), slop=slop))))
        elif m.group("star"):
            text = m.group("word")
            if re.search(r"[^\W_]", text) is None:
                return None  # a wildcard with no letters: the full parse names it
            items.append(("node", text_pattern(text.lower(), prefix=True)))
        else:
            terms = analyze(m.group("word"))
            node: Node | None = None
            if len(terms) == 1:
                node = Term(terms[0])
            elif terms:
                node = And(tuple(Term(t) for t in terms))
            items.append(("node", node))
    # the full parse's operator passes: NOT wraps the item after it, then AND, then OR join
    # their neighbours, left to right; an operator without a term beside it is repaired there
    i = 0
    while i < len(items):
        if items[i] == ("op", "NOT"):
            if i == len(items) - 1 or items[i + 1][0] == "op":
                return None
            items[i:i + 2] = [("not", [items[i + 1]])]
        i += 1
    for op, kind in _JOINS:
        i = 0
        while i < len(items):
            if items[i] != ("op", op):
                i += 1
                continue
            if i == 0 or i == len(items) - 1 or items[i + 1][0] == "op" or items[i - 1][0] == "op":
                return None
            left, right = items[i - 1], items[i + 1]
            if left[0] == kind:
                left[1].append(right)
                del items[i:i + 2]
            else:
                items[i - 1:i + 2] = [(kind, [left, right])]
    if any(item[0] == "op" for item in items):
        return None

    def node_of(item: _FastItem) -> Node | None:
        if item[0] == "node":
            return item[1]
        if item[0] == "op":  # none is left by here (checked above)
            return None
        kind = item[0]
        subs = [n for n in (node_of(it) for it in item[1]) if n is not None]
        if kind == "not":
            return None if not subs or isinstance(subs[0], Null) else Not(subs[0])
        return Or(tuple(subs)) if kind == "or" else And(tuple(subs))

    tree = normalize(And(tuple(n for n in (node_of(it) for it in items) if n is not None)))
    return None if isinstance(tree, Null) else tree


def parse(query: str) -> tuple[Node, list[Problem]]:
    """The query tree Whoosh would search for, and what it repaired or dropped on the way."""
    fast = _fast(query)
    if fast is not None:
        return fast, []
    return full_parse(query)


def full_parse(query: str) -> tuple[Node, list[Problem]]:
    """parse() without the fast path: Whoosh's tagger and filters, for any query."""
    p = _Parse(query)
    if not query.strip():
        p.problem(0, "empty query: give one or more words, e.g. 'annual report'")
        return NULL, p.problems
    items = _tag(query)
    for item in items:
        if isinstance(item, _Text) and item.kind == "word":
            for i, c in enumerate(item.text):
                if c in _QUOTES:
                    p.problem(item.pos + i, f"unbalanced quote at position {item.pos + i + 1}: close the "
                                            'phrase with a second " (e.g. "annual report")')
                    break
            if item.text in _OPERATORS:  # not where Whoosh reads an operator: the stop word "and"
                first = not query[:item.pos].strip(" \t\r\n(")
                p.problem(item.pos, _needs_before(item.text, item.pos) if first and item.text != "NOT"
                          else _needs_after(item.text, item.pos))
    top = p.groups(items)
    p.clean_boost(top)
    p.wildcards(top)
    top = p.fieldnames(top)
    p.whitespace(top)
    p.boosts(top)
    top = p.operators(top)
    tree = p.to_node(top)
    tree = NULL if tree is None else normalize(tree)
    _check_patterns(top, p)
    if isinstance(tree, Null):
        p.problem(0, "the query has no searchable words: stop words (the, of, and, ...) and single "
                     "characters are not indexed; use other words, e.g. 'annual report'")
    p.problems.sort(key=lambda pr: pr.pos)
    return tree, p.problems


def _check_patterns(group: _Group, p: _Parse) -> None:
    for item in group.nodes:
        if isinstance(item, _Group):
            _check_patterns(item, p)
        elif isinstance(item, _Text) and item.kind in ("wild", "prefix") and not re.search(r"[^\W_]", item.text):
            shown = item.text + ("*" if item.kind == "prefix" else "")
            p.problem(item.pos, f"wildcard {shown!r} has no letters or digits: it matches every page; "
                                "write e.g. 'report*'")
