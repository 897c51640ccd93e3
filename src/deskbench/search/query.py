"""Whoosh query syntax, parsed into a small tree and translated to tantivy queries.

The tree is the one MADQA's official tool (Whoosh's default QueryParser) searches for, malformed
queries included: see qparser.py for the syntax and how Whoosh repairs what does not fit. Agents
get that lenient parse, as the official agents do. `strict=True` (the `deskbench search` CLI and
the annotation app) refuses instead what Whoosh would repair or drop silently: unbalanced quotes
or parentheses, an operator without a term, a wildcard with no letters, a query of stop words
only: QuerySyntaxError with a one-line message.

Scores follow Whoosh's scoring where it differs from plain BM25 sums: a wildcard matching one
index term is BM25-scored, matching several it scores 1 (Whoosh's constant-score Prefix and
Wildcard); NOT x, `*`, file:/page_number:/total_pages: terms score 1. `a REQUIRE b` is matched as Whoosh
2.7.4 matches it: as `a ANDNOT b` (see nodes.Require).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import tantivy

from deskbench.errors import QuerySyntaxError
from deskbench.search.nodes import (
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
)
from deskbench.search.qparser import Problem, parse

__all__ = [
    "And", "AndMaybe", "AndNot", "Empty", "Every", "FieldTerm", "Highlights", "Node", "Not", "Null", "Or",
    "Phrase", "Problem", "Require", "Term", "Wildcard", "highlights", "parse_query", "to_tantivy",
]


def parse_query(query: str, *, strict: bool = False) -> Node:
    """The tree Whoosh would search for `query`. Lenient by default (never raises: a query with
    nothing searchable is Null, which matches no page); strict raises QuerySyntaxError on the
    first thing Whoosh would have repaired or dropped."""
    tree, problems = parse(query)
    if strict and problems:
        raise QuerySyntaxError(problems[0].message)
    return tree


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
    elif isinstance(node, And | Or):
        for child in node.must if isinstance(node, And) else node.should:
            highlights(child, out)
    elif isinstance(node, AndNot | Require):
        highlights(node.a, out)
    elif isinstance(node, AndMaybe):
        highlights(node.a, out)
        highlights(node.b, out)
    return out


TermExpander = Callable[[Wildcard], "list[str] | None"]
"""Index terms a wildcard matches, or None when there are too many to list."""


def to_tantivy(
    node: Node, schema: tantivy.Schema, fields: Mapping[FieldName, str], expand: TermExpander | None = None
) -> tantivy.Query:
    """Translate the parsed tree into a tantivy query; `fields` names the index field of each
    schema field. With `expand`, a wildcard matching exactly one index term is that term
    (BM25-scored, as Whoosh's); otherwise it scores 1 on every page it matches."""
    q = _translate(node, schema, fields, expand)
    return q if node.boost == 1.0 else tantivy.Query.boost_query(q, node.boost)


def _translate(
    node: Node, schema: tantivy.Schema, fields: Mapping[FieldName, str], expand: TermExpander | None
) -> tantivy.Query:
    text = fields["text"]

    def sub(child: Node) -> tantivy.Query:
        return to_tantivy(child, schema, fields, expand)

    if isinstance(node, Term):
        return tantivy.Query.term_query(schema, text, node.text)
    if isinstance(node, Wildcard):
        terms = expand(node) if expand else None
        if terms is not None and not terms:
            return tantivy.Query.empty_query()
        if terms is not None and len(terms) == 1:
            return tantivy.Query.term_query(schema, text, terms[0])
        # the listed terms need no regex automaton (its construction is most of a query's cost)
        inner = (tantivy.Query.term_set_query(schema, text, terms) if terms is not None
                 else tantivy.Query.regex_query(schema, text, node.regex))
        return tantivy.Query.const_score_query(inner, 1.0)
    if isinstance(node, Phrase):
        offsets = node.offsets or tuple(range(len(node.words)))
        words: list[str | tuple[int, str]] = [(o, w.text) for o, w in zip(offsets, node.words, strict=True)]
        return tantivy.Query.phrase_query(schema, text, words, slop=max(node.slop - 1, 0))
    if isinstance(node, FieldTerm):
        name = fields[node.field]
        if node.regex:
            inner = tantivy.Query.regex_query(schema, name, str(node.value))
        else:
            inner = tantivy.Query.term_query(schema, name, node.value)
        return tantivy.Query.const_score_query(inner, 1.0)
    if isinstance(node, Every):
        return tantivy.Query.all_query()
    if isinstance(node, Null | Empty):
        return tantivy.Query.empty_query()
    if isinstance(node, Not):
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, tantivy.Query.all_query()),
                                            (tantivy.Occur.MustNot, sub(node.child))])
    if isinstance(node, And):
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, sub(c)) for c in node.must])
    if isinstance(node, Or):
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, sub(c)) for c in node.should])
    if isinstance(node, AndNot | Require):  # Require: whoosh 2.7.4 matches it as ANDNOT (nodes.Require)
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, sub(node.a)), (tantivy.Occur.MustNot, sub(node.b))])
    if isinstance(node, AndMaybe):
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, sub(node.a)), (tantivy.Occur.Should, sub(node.b))])
    raise TypeError(f"unknown query node {node!r}")
