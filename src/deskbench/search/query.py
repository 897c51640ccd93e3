"""Whoosh query syntax, parsed into the small tree of query types Whoosh builds.

The tree is the one MADQA's official tool (Whoosh's default QueryParser) searches for, malformed
queries included: see qparser.py for the syntax and how Whoosh repairs what does not fit. Agents
get that lenient parse, as the official agents do. `strict=True` (the `deskbench search` CLI and
the annotation app) refuses instead what Whoosh would repair or drop silently: unbalanced quotes
or parentheses, an operator without a term, a wildcard with no letters, a query of stop words
only: QuerySyntaxError with a one-line message.

The tree is matched and scored as Whoosh matches and scores it by search/scoring.py. `a REQUIRE
b` is matched as Whoosh 2.7.4 matches it: as `a ANDNOT b` (see nodes.Require).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from deskbench.errors import QuerySyntaxError
from deskbench.search.nodes import (
    And,
    AndMaybe,
    AndNot,
    Empty,
    Every,
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
    "Phrase", "Problem", "Require", "Term", "Wildcard", "highlights", "parse_query",
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
    literals: list[str] = field(default_factory=list)  # each pattern's literal start ("" = none)

    def matches(self, term: str) -> bool:
        return term in self.terms or any(p.fullmatch(term) for p in self.patterns)


def highlights(node: Node, out: Highlights | None = None) -> Highlights:
    """Collect the terms a matching page contains because of this query (excluded terms aside)."""
    out = out or Highlights()
    if isinstance(node, Term):
        out.terms.add(node.text)
    elif isinstance(node, Wildcard):
        out.patterns.append(re.compile(node.regex))
        out.literals.append(node.literal)
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
