"""The parsed query: a small tree of the query types Whoosh's parser builds, with Whoosh's
normalisation (nested groups merged, Null clauses and duplicates dropped, the Every quirk).

Fields: "text" (the page text), and the other fields of MADQA's official index schema, "file"
(the document's file name), "page_number" and "total_pages".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

FieldName = Literal["text", "file", "page_number", "total_pages"]
FIELDS: tuple[FieldName, ...] = ("text", "file", "page_number", "total_pages")


@dataclass(frozen=True)
class Term:
    text: str
    boost: float = 1.0


@dataclass(frozen=True)
class Wildcard:
    """Whoosh's Prefix (`prefix`: the terms starting with `literal`) or Wildcard (the terms
    starting with `literal` that `regex`, its fnmatch translation, matches), over the text
    lower-cased as Whoosh's parser leaves it."""

    raw: str  # as Whoosh holds it, e.g. "report*" for Report*
    regex: str  # the terms it matches (re.match), e.g. fnmatch.translate("rep?rt*")
    boost: float = 1.0
    literal: str = ""  # the text before the first wildcard: terms are listed from it
    prefix: bool = False


@dataclass(frozen=True)
class Phrase:
    words: tuple[Term, ...]
    slop: int = 1  # Whoosh's: 1 = the words next to each other
    boost: float = 1.0


@dataclass(frozen=True)
class FieldTerm:
    """A term in another field of the official schema: file:x.pdf, page_number:3, total_pages:12,
    or a file name pattern (file:annual*) when `regex` is set."""

    field: FieldName
    value: str | int
    regex: bool = False
    boost: float = 1.0


@dataclass(frozen=True)
class Every:
    """Every page (Whoosh's `*` and `*:*`)."""

    field: FieldName | None = "text"
    boost: float = 1.0


@dataclass(frozen=True)
class Null:
    """Matches nothing: a query of stop words only, an empty group."""

    boost: float = 1.0


@dataclass(frozen=True)
class Empty:
    """Matches nothing but, unlike Null, stays in its group, so an And holding it matches nothing:
    Whoosh's error query (page_number:x) and a wildcard no index term can match (e-mail*)."""

    field: FieldName | None = None
    boost: float = 1.0


@dataclass(frozen=True)
class And:
    must: tuple[Node, ...]
    boost: float = 1.0


@dataclass(frozen=True)
class Or:
    should: tuple[Node, ...]
    boost: float = 1.0


@dataclass(frozen=True)
class Not:
    """Every page without `child` (score 1, as Whoosh's); inside And it excludes."""

    child: Node
    boost: float = 1.0


@dataclass(frozen=True)
class AndNot:
    """`a ANDNOT b`: a's pages without b's, scored by a. (whoosh 2.7.4's AndNotMatcher can keep
    a's first page when b's first page comes before it; deskbench excludes it.)"""

    a: Node
    b: Node
    boost: float = 1.0


@dataclass(frozen=True)
class AndMaybe:
    """`a ANDMAYBE b`: a's pages; b adds to the score where it matches."""

    a: Node
    b: Node
    boost: float = 1.0


@dataclass(frozen=True)
class Require:
    """`a REQUIRE b`, as whoosh 2.7.4 runs it: its Require.matcher builds an AndNotMatcher, so
    the pages of a WITHOUT b (documented as "a's pages that are also b's", not what it does)."""

    a: Node
    b: Node
    boost: float = 1.0


Node = Term | Wildcard | Phrase | FieldTerm | Every | Null | Empty | And | Or | Not | AndNot | AndMaybe | Require
Binary = AndNot | AndMaybe | Require

NULL = Null()


def field_of(node: Node) -> FieldName | None:
    """Whoosh's Query.field(): the one field a query searches, else None."""
    if isinstance(node, Term | Wildcard | Phrase):
        return "text"
    if isinstance(node, FieldTerm | Every | Empty):
        return node.field
    if isinstance(node, And | Or):
        children = node.must if isinstance(node, And) else node.should
        fields = {field_of(c) for c in children}
        return fields.pop() if len(fields) == 1 else None
    if isinstance(node, AndNot | AndMaybe | Require):
        f = field_of(node.a)
        return f if field_of(node.b) == f else None
    return None


def with_boost(node: Node, boost: float) -> Node:
    return node if node.boost == boost else replace(node, boost=boost)


def normalize(node: Node) -> Node:
    """Whoosh's Query.normalize() for the types above."""
    if isinstance(node, And | Or):
        return _normalize_compound(node)
    if isinstance(node, Not):
        child = normalize(node.child)
        return NULL if isinstance(child, Null) else replace(node, child=child)
    if isinstance(node, AndNot | AndMaybe | Require):
        a, b = normalize(node.a), normalize(node.b)
        if isinstance(a, Null) or (isinstance(node, Require) and isinstance(b, Null)):
            return NULL
        if isinstance(b, Null):
            return a
        return replace(node, a=a, b=b)
    if isinstance(node, Phrase):
        if not node.words:
            return NULL
        if len(node.words) == 1:
            return Term(node.words[0].text)  # Phrase.normalize: the term, its boost dropped
    return node


def _normalize_compound(node: And | Or) -> Node:
    children: list[Node] = []
    for child in node.must if isinstance(node, And) else node.should:
        child = normalize(child)
        if type(child) is type(node):  # And inside And: its clauses join this one's
            inner = child.must if isinstance(child, And) else child.should
            children += [with_boost(c, c.boost * child.boost) for c in inner]
        else:
            children.append(child)
    if all(isinstance(c, Null) for c in children):
        return NULL
    if any(isinstance(c, Every) and c.field is None for c in children):
        return Every(None)
    # Whoosh's quirk: an Every in a field swallows the group's other clauses in that field, so
    # `building *` matches every page.
    every_fields: set[FieldName | None] = set()
    kept: list[Node] = []
    for c in children:
        if field_of(c) in every_fields:
            continue
        if isinstance(c, Every):
            every_fields.add(c.field)
        kept.append(c)
    unique: list[Node] = []
    for c in kept:
        if not isinstance(c, Every) and field_of(c) in every_fields:
            continue
        if c not in unique and not isinstance(c, Null):
            unique.append(c)
    if not unique:
        return NULL
    if len(unique) == 1:
        only = unique[0]
        return with_boost(only, only.boost * node.boost) if node.boost != 1.0 else only
    return type(node)(tuple(unique), node.boost)
