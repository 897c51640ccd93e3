"""Whoosh query syntax, parsed into a small tree and translated to tantivy queries.

What MADQA's agents and annotators typed: words (AND by default), `AND`, `OR`, `NOT` (upper
case, as in Whoosh), parentheses, `"exact phrases"`, and wildcards `*` / `?` (matched against
index terms as regular expressions). Precedence: NOT > AND > OR. A malformed query raises
QuerySyntaxError with a message written for the agent that will read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import tantivy

from deskbench.errors import QuerySyntaxError
from deskbench.search.analyzer import analyze

OPERATORS = {"AND", "OR", "NOT"}


@dataclass(frozen=True)
class Term:
    text: str


@dataclass(frozen=True)
class Wildcard:
    raw: str
    regex: str


@dataclass(frozen=True)
class Phrase:
    words: tuple[Term | Wildcard, ...]


@dataclass(frozen=True)
class And:
    must: tuple[Node, ...]
    must_not: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Or:
    should: tuple[Node, ...]


Node = Term | Wildcard | Phrase | And | Or


@dataclass
class _Token:
    kind: str  # WORD, PHRASE, LPAREN, RPAREN, AND, OR, NOT
    text: str
    pos: int


def _lex(query: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(_Token("LPAREN" if ch == "(" else "RPAREN", ch, i))
            i += 1
        elif ch in "\"“”":
            end = _closing_quote(query, i + 1)
            if end < 0:
                raise QuerySyntaxError(
                    f"unbalanced quote at position {i + 1}: close the phrase with a second \" "
                    f'(e.g. "annual report")'
                )
            tokens.append(_Token("PHRASE", query[i + 1 : end], i))
            i = end + 1
        else:
            j = i
            while j < n and not query[j].isspace() and query[j] not in "()\"“”":
                j += 1
            word = query[i:j]
            kind = word if word in OPERATORS else "WORD"
            tokens.append(_Token(kind, word, i))
            i = j
    return tokens


def _closing_quote(query: str, start: int) -> int:
    for j in range(start, len(query)):
        if query[j] in "\"“”":
            return j
    return -1


def _wildcard(word: str) -> Wildcard | None:
    """`car*` -> regex over index terms; None when nothing searchable is left."""
    parts = re.split(r"([*?])", word)
    regex = []
    literal = False
    for part in parts:
        if part == "*":
            regex.append(".*")
        elif part == "?":
            regex.append(".")
        elif part:
            terms = analyze(part)
            if terms:
                literal = True
                regex.append(re.escape("".join(terms)))
    if not literal:
        return None
    return Wildcard(word, "".join(regex))


def _word(word: str) -> Node | None:
    if "*" in word or "?" in word:
        wc = _wildcard(word)
        if wc is None:
            raise QuerySyntaxError(
                f"wildcard {word!r} has no letters or digits: write e.g. 'report*', not '*'"
            )
        return wc
    terms = analyze(word)
    if not terms:
        return None
    if len(terms) == 1:
        return Term(terms[0])
    return Phrase(tuple(Term(t) for t in terms))  # e.g. "e-mail", "2015/16": keep them adjacent


def _phrase(text: str) -> Node | None:
    words: list[Term | Wildcard] = []
    for raw in text.split():
        node = _word(raw)
        if isinstance(node, Phrase):
            words.extend(node.words)
        elif node is not None:
            words.append(node)  # type: ignore[arg-type]
    if not words:
        return None
    if len(words) == 1:
        return words[0]
    return Phrase(tuple(words))


@dataclass
class _Parser:
    tokens: list[_Token]
    query: str
    i: int = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_expr()
        tok = self.peek()
        if tok is not None:
            if tok.kind == "RPAREN":
                raise QuerySyntaxError(
                    f"unbalanced parenthesis at position {tok.pos + 1}: remove the ')' or add a '('"
                )
            raise QuerySyntaxError(f"unexpected {tok.text!r} at position {tok.pos + 1}")
        if node is None:
            raise QuerySyntaxError(
                "the query has no searchable words: use letters or digits, e.g. 'annual report'"
            )
        return node

    def or_expr(self) -> Node | None:
        branches = [self.and_expr()]
        while (tok := self.peek()) is not None and tok.kind == "OR":
            self.take()
            if self.peek() is None or self.peek().kind in ("OR", "AND", "RPAREN"):  # type: ignore[union-attr]
                raise QuerySyntaxError(f"OR at position {tok.pos + 1} needs a term after it")
            branches.append(self.and_expr())
        kept = [b for b in branches if b is not None]
        if not kept:
            return None
        return kept[0] if len(kept) == 1 else Or(tuple(kept))

    def and_expr(self) -> Node | None:
        must: list[Node] = []
        must_not: list[Node] = []
        start = self.peek()
        while (tok := self.peek()) is not None and tok.kind not in ("OR", "RPAREN"):
            if tok.kind == "AND":
                self.take()
                nxt = self.peek()
                if not must and not must_not:
                    raise QuerySyntaxError(f"AND at position {tok.pos + 1} needs a term before it")
                if nxt is None or nxt.kind in ("AND", "OR", "RPAREN"):
                    raise QuerySyntaxError(f"AND at position {tok.pos + 1} needs a term after it")
                continue
            if tok.kind == "NOT":
                self.take()
                nxt = self.peek()
                if nxt is None or nxt.kind in ("AND", "OR", "RPAREN", "NOT"):
                    raise QuerySyntaxError(
                        f"NOT at position {tok.pos + 1} needs a term after it, e.g. 'budget NOT draft'"
                    )
                node = self.primary()
                if node is not None:
                    must_not.append(node)
                continue
            node = self.primary()
            if node is not None:
                must.append(node)
        if must_not and not must:
            pos = start.pos + 1 if start else 1
            raise QuerySyntaxError(
                f"NOT at position {pos} has nothing to exclude from: a query cannot only exclude; "
                "add a term to search for, e.g. 'budget NOT draft'"
            )
        if not must:
            return None
        if len(must) == 1 and not must_not:
            return must[0]
        return And(tuple(must), tuple(must_not))

    def primary(self) -> Node | None:
        tok = self.take()
        if tok.kind == "LPAREN":
            node = self.or_expr()
            close = self.peek()
            if close is None or close.kind != "RPAREN":
                raise QuerySyntaxError(
                    f"unbalanced parenthesis at position {tok.pos + 1}: add the closing ')'"
                )
            self.take()
            return node
        if tok.kind == "RPAREN":
            raise QuerySyntaxError(
                f"unbalanced parenthesis at position {tok.pos + 1}: remove the ')' or add a '('"
            )
        if tok.kind == "PHRASE":
            return _phrase(tok.text)
        return _word(tok.text)


def parse_query(query: str) -> Node:
    """Parse Whoosh syntax; raises QuerySyntaxError with an agent-readable message."""
    if not query or not query.strip():
        raise QuerySyntaxError("empty query: give one or more words, e.g. 'annual report'")
    return _Parser(_lex(query), query).parse()


@dataclass
class Highlights:
    """What a snippet should mark: plain terms and wildcard patterns from positive clauses."""

    terms: set[str] = field(default_factory=set)
    patterns: list[re.Pattern[str]] = field(default_factory=list)

    def matches(self, term: str) -> bool:
        return term in self.terms or any(p.fullmatch(term) for p in self.patterns)


def highlights(node: Node, out: Highlights | None = None) -> Highlights:
    """Collect the terms a matching page contains because of this query (excluded terms aside)."""
    out = out or Highlights()
    if isinstance(node, Term):
        out.terms.add(node.text)
    elif isinstance(node, Wildcard):
        out.patterns.append(re.compile(node.regex))
    elif isinstance(node, Phrase):
        for w in node.words:
            highlights(w, out)
    elif isinstance(node, And):
        for child in node.must:
            highlights(child, out)
    elif isinstance(node, Or):
        for child in node.should:
            highlights(child, out)
    return out


TermExpander = Callable[[Wildcard], "list[str] | None"]
"""Index terms a wildcard matches, or None when there are too many to list (constant score)."""


def to_tantivy(
    node: Node, schema: tantivy.Schema, field_name: str, expand: TermExpander | None = None
) -> tantivy.Query:
    """Translate the parsed tree into a tantivy query over one text field.

    With `expand`, a wildcard becomes an OR of the index terms it matches, each scored by BM25 as
    Whoosh scores its expanded wildcards; without it (or past the expansion cap) tantivy's regex
    query matches the same pages with a constant score.
    """
    if isinstance(node, Term):
        return tantivy.Query.term_query(schema, field_name, node.text)
    if isinstance(node, Wildcard):
        terms = expand(node) if expand else None
        if terms is None:
            return tantivy.Query.regex_query(schema, field_name, node.regex)
        if not terms:
            return tantivy.Query.empty_query()
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, field_name, t)) for t in terms]
        )
    if isinstance(node, Phrase):
        if any(isinstance(w, Wildcard) for w in node.words):
            words: list[str | tuple[int, str]] = [
                w.regex if isinstance(w, Wildcard) else re.escape(w.text) for w in node.words
            ]
            return tantivy.Query.regex_phrase_query(schema, field_name, words)
        return tantivy.Query.phrase_query(schema, field_name, [w.text for w in node.words])  # type: ignore[union-attr]
    if isinstance(node, And):
        clauses = [(tantivy.Occur.Must, to_tantivy(c, schema, field_name, expand)) for c in node.must]
        clauses += [(tantivy.Occur.MustNot, to_tantivy(c, schema, field_name, expand)) for c in node.must_not]
        return tantivy.Query.boolean_query(clauses)
    if isinstance(node, Or):
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, to_tantivy(c, schema, field_name, expand)) for c in node.should]
        )
    raise TypeError(f"unknown query node {node!r}")
