"""Whoosh 2.7.4's matching and BM25F scoring of a parsed query, over the compiled index.

Each query node gives the pages it matches and their scores as whoosh.searching.Searcher.search
computes them for MADQA's official tool (default BM25F), the result list being the top k by
score, ties by page number (Whoosh's document number). What Whoosh's matchers add, and in which
order, is done here too, so the scores are Whoosh's to the last bit (a page missing from one
side of a union adds 0.0 there, which changes no float):

- a term scores its precomputed BM25F score, times its boost (a WrappingMatcher);
- AND builds a binary tree of IntersectionMatchers in the Huffman order of
  `make_weighted_tree` (weights: minus each clause's `estimate_size`), OR one of UnionMatchers
  (weights: estimate_size) when it has 2 clauses or the index has more than 5,000 pages, and
  otherwise an ArrayUnionMatcher that adds the clauses' scores (times the boost) in order and
  drops pages whose sum is not above 0; each tree node adds the scores of its two sides;
- a NOT clause (InverseMatcher) matches the pages without it and scores 1 (so `a NOT b` scores
  a's score + 1); `a ANDNOT b` and `a REQUIRE b` (which 2.7.4 runs as ANDNOT) score a, and keep
  a's first page when b's first page comes before it and b holds it too (AndNotMatcher's
  `_find_first` looks no further), unless the collector's first skip_to_quality(0) corrects it;
  `a ANDMAYBE b` adds b's score where b matches;
- a phrase matches the pages where its words follow each other (each within `slop` positions of
  the one before, SpanNear2) and scores the sum of its words' scores (a balanced tree);
- a prefix or wildcard matching one term is that term (its boost dropped, as Whoosh drops it);
  several terms are an OR of them in a context with no weighting: a tree of UnionMatchers of the
  terms' BM25F scores (the searcher's weighting stands in for the missing one), or, where the
  ArrayUnionMatcher is used (3 or more terms on an index of at most 5,000 pages, or 1,024 or
  more terms), a constant score of 1;
- `*` matches the pages with at least one term, `*:*` every page, both with the boost as score.

What is not copied: Whoosh's TopCollector, to save time, skips postings by block-quality
bounds and rewrites the matcher tree as the k-th best score rises, and some of those shortcuts
lose pages (an IntersectionMatcher or UnionMatcher skips one side's blocks judged against the
other side's *current* block only; an AndMaybeMatcher made from a UnionMatcher is moved with
skip_to and leaves its second side behind, missing its score; a phrase matcher that skips lands
on pages without the phrase). deskbench returns the true top k of Whoosh's own scores, which is
what Whoosh returns when none of these fire (most queries; see tests/search/test_whoosh_parity.py).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np
import numpy.typing as npt

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
from deskbench.search.postings import Compiled

DocArray = npt.NDArray[np.integer]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

ARRAY_UNION_MAX_PAGES = 5000
"""whoosh.query.Or picks its UnionMatcher tree on indexes of more pages than this."""
TOO_MANY_CLAUSES = 1024
"""... and its ArrayUnionMatcher from this many clauses on, whatever the index size."""


@dataclass(frozen=True)
class Hits:
    """Pages (ascending document numbers) and their scores."""

    docs: DocArray
    scores: FloatArray

    def __len__(self) -> int:
        return len(self.docs)


EMPTY = Hits(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))


@dataclass(frozen=True)
class _Leaves:
    """The clauses of an OR, their pages and scores end to end: clause i is [ptr[i], ptr[i + 1])."""

    docs: DocArray
    scores: FloatArray
    ptr: list[int]


def _constant(docs: DocArray, score: float) -> Hits:
    return Hits(docs, np.full(len(docs), score, dtype=np.float64))


def _boosted(h: Hits, boost: float) -> Hits:
    return h if boost == 1.0 else Hits(h.docs, h.scores * boost)


def _searching_pays(docs: DocArray, among: DocArray) -> bool:
    """A binary search per page (~25 ns each) against a lookup table the size of the index
    (~9 us to make, ~2 ns a page to fill and read)."""
    return len(docs) * 20 < 9000 + 2 * len(among)


def _member(docs: DocArray, among: DocArray, n_pages: int) -> BoolArray:
    """For each of `docs`, whether it is in `among` (both ascending pages below n_pages)."""
    if not len(among) or not len(docs):
        return np.zeros(len(docs), dtype=bool)
    if _searching_pays(docs, among):
        at = np.searchsorted(among, docs)
        at[at == len(among)] = 0
        return cast(BoolArray, among[at] == docs)
    table = np.zeros(n_pages, dtype=bool)
    table[among] = True
    return table[docs]


def _positions(docs: DocArray, among: DocArray, n_pages: int) -> tuple[npt.NDArray[np.intp], BoolArray]:
    """For each of `docs`, its index in `among` and whether it is there (both ascending pages
    below n_pages): a binary search each, or one lookup table when `docs` is long."""
    if not len(among):
        return np.zeros(len(docs), dtype=np.intp), np.zeros(len(docs), dtype=bool)
    if not _searching_pays(docs, among):
        table = np.full(n_pages, -1, dtype=np.intp)
        table[among] = np.arange(len(among))
        at = table[docs]
        found = at >= 0
        at[~found] = 0
        return at, found
    at = np.searchsorted(among, docs)
    at[at == len(among)] = 0
    return at, among[at] == docs


def _best(scores: FloatArray, k: int, floor: float = -np.inf) -> list[int]:
    """Indexes of the k best scores above `floor`, best first, ties by index: argmax returns
    the first of equal maxima. (np.partition, a selection, slows down 15-fold on arrays of many
    equal values, as constant scores and unmatched pages give.)"""
    left = scores.copy()
    out: list[int] = []
    for _ in range(min(k, len(left))):
        i = int(np.argmax(left))
        if not left[i] > floor:
            break
        out.append(i)
        left[i] = -np.inf
    return out


def top_of(h: Hits, k: int) -> list[tuple[int, float]]:
    """The first k (page, score): best score first, ties by page (TopCollector's order)."""
    if not len(h) or k < 1:
        return []
    order = _best(h.scores, k)
    return list(zip(h.docs[order].tolist(), h.scores[order].tolist(), strict=True))


def _top_positive(scores: FloatArray, k: int) -> list[tuple[int, float]]:
    """top_of over every page's score, the pages scoring 0 being no match."""
    order = _best(scores, k, floor=0.0)
    return list(zip(order, scores[order].tolist(), strict=True))


def _positive(node: Node) -> bool:
    """Whether every score the node gives is above 0: only a boost of 0 makes one 0."""
    if isinstance(node, And | Or):
        return node.boost != 0 and all(_positive(c) for c in (node.must if isinstance(node, And) else node.should))
    if isinstance(node, AndNot | Require):
        return _positive(node.a)
    if isinstance(node, AndMaybe):
        return _positive(node.a) and _positive(node.b)
    if isinstance(node, Not | Every):
        return True  # 1, or the boost (0 reads as 1)
    if isinstance(node, Wildcard | Phrase | Term | FieldTerm):
        return node.boost != 0
    return True


# -- Whoosh's matcher tree shapes -----------------------------------------------------------------


_Tree = int | tuple["_Tree", "_Tree"]
"""A matcher tree's shape: a leaf's index, or (left, right)."""


def weighted_tree(weights: list[int]) -> _Tree:
    """whoosh.util.make_weighted_tree's shape: sort (stably: matchers compare equal) by weight,
    join the first two, insert the pair after the items of equal weight."""
    order = sorted(range(len(weights)), key=weights.__getitem__)
    keys = [weights[i] for i in order]
    nodes: list[_Tree] = list(order)
    while len(nodes) > 1:
        w = keys[0] + keys[1]
        pair = (nodes[0], nodes[1])
        del keys[:2], nodes[:2]
        at = bisect_right(keys, w)
        keys.insert(at, w)
        nodes.insert(at, pair)
    return nodes[0]


def binary_tree(n: int, lo: int = 0) -> _Tree:
    """whoosh.util.make_binary_tree's shape over n leaves: halves, the first half the smaller."""
    if n == 1:
        return lo
    half = n // 2
    return (binary_tree(half, lo), binary_tree(n - half, lo + half))


def _sum(tree: _Tree, values: list[FloatArray]) -> FloatArray:
    """The tree's sums where every leaf has a value (left + right at each node), walked with a
    stack: a tree of 1,000 clauses can be that deep."""
    stack: list[tuple[_Tree, bool]] = [(tree, False)]
    out: list[FloatArray] = []
    while stack:
        node, joined = stack.pop()
        if isinstance(node, int):
            out.append(values[node])
        elif joined:
            b = out.pop()
            out.append(out.pop() + b)
        else:
            stack += [(node, True), (node[1], False), (node[0], False)]
    return out[0]


def _tree_sums(tree: _Tree, n: int, rows: DocArray, leaves: npt.NDArray[np.intp],
               weights: FloatArray) -> tuple[DocArray, FloatArray]:
    """The tree's sum for each row of (row, leaf, weight) entries: plain Python for a few rows,
    a column per leaf otherwise."""
    at, where = np.unique(rows, return_inverse=True)
    # An absent leaf adds 0.0, which changes no float: the tree's plain sums are its sums over
    # the leaves present, as Whoosh's UnionMatcher takes the one side present.
    table = np.zeros((n, len(at)))
    table[leaves, where] = weights
    return at, _sum(tree, list(table))


def _chain(tree: _Tree) -> list[int] | None:
    """The leaves bottom-up when each node has at most one non-leaf side: then adding a page's
    scores one by one in this order is the tree's sum (a + b = b + a at each node)."""
    top_down: list[int] = []
    node = tree
    while not isinstance(node, int):
        left, right = node
        if isinstance(left, int) and isinstance(right, int):
            return [left, right, *reversed(top_down)]
        if isinstance(right, int):
            top_down.append(right)
            node = left
        elif isinstance(left, int):
            top_down.append(left)
            node = right
        else:
            return None
    return [node]


@lru_cache(maxsize=1)
def keep_freed_arrays() -> bool:
    """Ask glibc's malloc to keep freed memory up to 32 MB for reuse instead of handing each
    block over 128 KB back to the kernel: a search makes a few arrays the size of the page
    count, and mapping fresh memory for each (zeroed, page-faulted) cost 3 times the search
    itself. Process-wide; a no-op where there is no glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(-3, 32 << 20)) and bool(libc.mallopt(-1, 64 << 20))  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        return False


class Searcher:
    """Evaluates parsed queries over one compiled index (immutable: safe across threads)."""

    def __init__(self, ix: Compiled) -> None:
        keep_freed_arrays()
        self.ix = ix
        self.n = ix.n_pages
        self._all = np.arange(self.n, dtype=np.int64)
        self._with_text: DocArray | None = None
        self._expand = lru_cache(maxsize=4096)(self._expand_uncached)

    # -- results --------------------------------------------------------------------------

    def top(self, node: Node, k: int) -> list[tuple[int, float]]:
        """The first k (page, score) of Whoosh's results: best score first, ties by page."""
        if k < 1:
            return []
        # Searcher.search uses a TopCollector when k < the page count; its first step, on a
        # matcher with block qualities, is skip_to_quality(0), which an ANDNOT at the root
        # (and down its first operand) answers with a full _find_next: no first-page quirk there.
        if isinstance(node, Or | Wildcard):  # an OR at the top: picked from the scores of every page
            h = self._or(node, True, None, dense=True) if isinstance(node, Or) else self._wildcard(node, None, dense=True)
            if len(h) == self.n and h.docs is self._all:
                return _top_positive(h.scores, k)
            return top_of(h, k)
        return top_of(self._eval(node, True, k < self.n and self.quality(node)), k)

    def hits(self, node: Node) -> Hits:
        """Every page the query matches (Whoosh's search with no limit)."""
        return self._eval(node, True)

    def quality(self, node: Node) -> bool:
        """Whether the node's matcher supports block qualities (supports_block_quality)."""
        if isinstance(node, Every | Not):
            return False  # a ListMatcher without a scorer, an InverseMatcher
        if isinstance(node, And):
            return all(self.quality(c) for c in node.must)
        if isinstance(node, Or):
            return all(self.quality(c) for c in node.should)
        if isinstance(node, AndNot | Require):
            return self.quality(node.a)
        if isinstance(node, AndMaybe):
            return self.quality(node.a) and self.quality(node.b)
        return True  # term and field leaves, phrases, wildcards, the NullMatcher

    # -- Whoosh's estimate_size ---------------------------------------------------------

    def size(self, node: Node) -> int:
        ix = self.ix
        if isinstance(node, Term):
            t = ix.term(node.text)
            return ix.doc_frequency(t) if t >= 0 else 0
        if isinstance(node, Wildcard):
            terms = self._expand(node.regex, node.literal, node.prefix)
            return sum(int(ix.term_ptr[t + 1] - ix.term_ptr[t]) for t in terms) if terms else 0
        if isinstance(node, Phrase):
            return min(self.size(w) for w in node.words)
        if isinstance(node, FieldTerm):
            return len(self._field_docs(node))
        if isinstance(node, Every | Not):
            return self.n
        if isinstance(node, Null | Empty):
            return 0
        if isinstance(node, And):
            return min(self.size(c) for c in node.must)
        if isinstance(node, Or):
            return min(sum(self.size(c) for c in node.should), self.n)
        if isinstance(node, Require):
            return self.size(node.b)
        if isinstance(node, AndNot | AndMaybe):
            return min(self.size(node.a) + self.size(node.b), self.n)
        raise TypeError(f"unknown query node {node!r}")

    # -- matching ------------------------------------------------------------------------

    def _term(self, t: int, within: DocArray | None = None) -> Hits:
        ix = self.ix
        lo, hi = ix.term_ptr[t], ix.term_ptr[t + 1]
        h = Hits(ix.post_doc[lo:hi], ix.post_score[lo:hi])
        return h if within is None else self._restrict(h, within)

    def _restrict(self, h: Hits, within: DocArray) -> Hits:
        """h's pages among `within`."""
        at, found = _positions(within, h.docs, self.n)
        return Hits(within[found], h.scores[at[found]])

    def _eval(self, node: Node, scored: bool, root: bool = False, within: DocArray | None = None) -> Hits:
        """The node's pages (those among `within` only, when given) and scores; `scored` is
        False in Whoosh's boolean contexts, `root` True down the first operands of ANDNOTs
        from the root when the collector found them with skip_to_quality."""
        if isinstance(node, Term):
            t = self.ix.term(node.text)
            return _boosted(self._term(t, within), node.boost) if t >= 0 else EMPTY
        if isinstance(node, And):
            return self._and(node, scored, within)
        if isinstance(node, Or):
            return self._or(node, scored, within)
        if isinstance(node, Phrase):
            return self._phrase(node, within)
        if isinstance(node, Wildcard):
            return self._wildcard(node, within)
        if isinstance(node, Not):
            docs = self._all if within is None else within
            return _constant(docs[~_member(docs, self._eval(node.child, False, within=within).docs, self.n)], 1.0)
        if isinstance(node, AndNot | Require):
            # the first-page quirk looks at the operands' own first pages: not restricted
            h = self._and_not(self._eval(node.a, scored, root), self._eval(node.b, False).docs, not root)
            return h if within is None else self._restrict(h, within)
        if isinstance(node, AndMaybe):
            a = self._eval(node.a, scored, within=within)
            b = self._eval(node.b, scored, within=a.docs)
            at, both = _positions(a.docs, b.docs, self.n)
            scores = a.scores.copy()
            scores[both] = a.scores[both] + b.scores[at[both]]
            return Hits(a.docs, scores)
        if isinstance(node, Every):
            docs = self._all if node.field is None else self._pages_with_text()
            h = _constant(docs, node.boost or 1.0)  # ListMatcher(all_weights=boost): 0 reads as 1
            return h if within is None else self._restrict(h, within)
        if isinstance(node, FieldTerm):
            h = self._field(node)
            return h if within is None else self._restrict(h, within)
        if isinstance(node, Null | Empty):
            return EMPTY
        raise TypeError(f"unknown query node {node!r}")

    def _or(self, node: Or, scored: bool, within: DocArray | None, dense: bool = False) -> Hits:
        hits = [self._eval(c, scored, within=within) for c in node.should]
        leaves = _Leaves(np.concatenate([h.docs for h in hits]), np.concatenate([h.scores for h in hits]),
                         [0, *np.cumsum([len(h) for h in hits]).tolist()])
        return self._union(leaves, [self.size(c) for c in node.should], node.boost, scored, within,
                           positive=_positive(node), dense=dense)

    def _and(self, node: And, scored: bool, within: DocArray | None) -> Hits:
        """IntersectionMatchers. The smallest clause gives the candidate pages; a term clause
        is looked up on them (NaN where it is missing: a sum with a NaN is no match), another
        clause is searched among the candidates left. The sums follow Whoosh's tree."""
        ix = self.ix
        children = node.must
        sizes = [self.size(c) for c in children]
        order = sorted(range(len(children)), key=lambda i: (isinstance(children[i], Not), sizes[i]))
        first = self._eval(children[order[0]], scored, within=within)
        docs = first.docs
        values: dict[int, FloatArray] = {order[0]: first.scores}  # by child, once it is read
        for i in order[1:]:
            if not len(docs):
                return EMPTY
            c = children[i]
            if isinstance(c, Term):
                t = ix.term(c.text)
                if t < 0:
                    return EMPTY
                lo, hi = ix.term_ptr[t], ix.term_ptr[t + 1]
                v = self._lookup(ix.post_doc[lo:hi], ix.post_score[lo:hi], docs)
                values[i] = v * c.boost if c.boost != 1.0 else v
                continue
            if isinstance(c, Not) and isinstance(c.child, Term):  # NOT word: 1 where the word is not
                t = ix.term(c.child.text)
                absent = np.ones(len(docs))
                if t >= 0:
                    absent[_member(docs, ix.post_doc[ix.term_ptr[t]:ix.term_ptr[t + 1]], self.n)] = np.nan
                values[i] = absent
                continue
            known = sorted(values)
            ok = ~np.isnan(sum(values[j] for j in known))
            if not ok.all():
                docs = docs[ok]
                for j in known:
                    values[j] = values[j][ok]
            h = self._eval(c, scored, within=docs)
            if len(h) != len(docs):
                keep = _member(docs, h.docs, self.n)
                docs = h.docs
                for j in known:
                    values[j] = values[j][keep]
            values[i] = h.scores
        scores = _sum(weighted_tree([-n for n in sizes]), [values[i] for i in range(len(children))])
        ok = ~np.isnan(scores)
        if not ok.all():
            docs, scores = docs[ok], scores[ok]
        return Hits(docs, scores * node.boost if node.boost != 1.0 else scores)

    def _lookup(self, docs: DocArray, scores: FloatArray, at: DocArray) -> FloatArray:
        """The scores of the pages `at` in (docs, scores), NaN where missing."""
        if _searching_pays(at, docs):
            where, found = _positions(at, docs, self.n)
            out = scores[where]
            out[~found] = np.nan
            return out
        table = np.full(self.n, np.nan)
        table[docs] = scores
        return table[at]

    def _union(self, leaves: _Leaves, sizes: list[int], boost: float, scored: bool,
               within: DocArray | None = None, positive: bool = False, dense: bool = False) -> Hits:
        """A tree of UnionMatchers (or Whoosh's ArrayUnionMatcher) over the leaves' pages (those
        among `within` only, when given). A page's scores are added one by one, in the tree's
        order when it is a chain; otherwise the pages in 3 or more leaves get the tree's sum.
        `positive`: every leaf score is above 0, so a page with a sum above 0 is a match;
        `dense` (with `positive`, no `within`): the scores of every page, 0 where none matches."""
        n = len(sizes)
        array_union = not (n < TOO_MANY_CLAUSES and (n == 2 or self.n > ARRAY_UNION_MAX_PAGES))
        tree = None if array_union else weighted_tree(sizes)
        chain = None if tree is None else _chain(tree)
        rows, weights = leaves.docs, leaves.scores
        if chain is not None and chain != sorted(chain):
            rows = np.concatenate([leaves.docs[leaves.ptr[i]:leaves.ptr[i + 1]] for i in chain])
            weights = np.concatenate([leaves.scores[leaves.ptr[i]:leaves.ptr[i + 1]] for i in chain])
        fold = tree is not None and chain is None
        leaf_of = np.repeat(np.arange(n), np.diff(leaves.ptr)) if fold else None
        universe = self._all if within is None else within
        if within is not None:  # rows: indexes into `within`
            at, found = _positions(rows, within, self.n)
            rows, weights = at[found], weights[found]
            leaf_of = None if leaf_of is None else leaf_of[found]
        if array_union and boost != 1.0 and scored:
            weights = weights * boost  # a[i] += m.score() * boost
        if len(rows) * 8 < len(universe) and not dense:
            return self._sparse_union(rows, weights, leaf_of, tree, n, universe, array_union, scored, boost)
        counted = leaf_of is not None or not positive or (array_union and not scored)
        count = np.bincount(rows, minlength=len(universe)) if counted else None
        if array_union and not scored:
            assert count is not None
            return _constant(universe[count > 0], 1.0)  # a[i] = 1: no scores
        acc = cast(FloatArray, np.bincount(rows, weights=weights, minlength=len(universe)))  # added one by one
        if leaf_of is not None:
            assert count is not None and tree is not None
            many = count >= 3  # only pages in 3 or more leaves can depend on the order of adding
            if many.any():
                picked = many[rows]
                summed, sums = _tree_sums(tree, n, rows[picked], leaf_of[picked], weights[picked])
                acc[summed] = sums
        if boost != 1.0 and not array_union:
            acc *= boost
        if dense and positive and within is None:
            return Hits(universe, acc)
        kept = np.flatnonzero(acc > 0 if count is None or array_union else count > 0)
        return Hits(universe[kept], acc[kept])

    @staticmethod
    def _sparse_union(rows: DocArray, weights: FloatArray, leaf_of: npt.NDArray[np.intp] | None, tree: _Tree | None,
                      n: int, universe: DocArray, array_union: bool, scored: bool, boost: float) -> Hits:
        """_union for few rows: sorted by page (stably: each page's rows stay in adding order)
        and added row by row, without arrays the size of the index."""
        order = np.argsort(rows, kind="stable")
        rows, weights = rows[order], weights[order]
        first = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        counts = np.diff(np.append(first, len(rows)))
        if array_union and not scored:
            return _constant(universe[rows[first]], 1.0)
        acc = weights[first].copy()
        for j in range(1, int(counts.max())):
            more = counts > j
            acc[more] = acc[more] + weights[first[more] + j]
        if leaf_of is not None and tree is not None:
            group = np.repeat(np.arange(len(first)), counts)  # each row's page (index into first)
            picked = counts[group] >= 3
            if picked.any():
                at, sums = _tree_sums(tree, n, group[picked], leaf_of[order][picked], weights[picked])
                acc[at] = sums
        docs = universe[rows[first]]
        if array_union:
            keep = acc > 0
            return Hits(docs[keep], acc[keep])
        return Hits(docs, acc * boost if boost != 1.0 else acc)

    def _wildcard(self, node: Wildcard, within: DocArray | None, dense: bool = False) -> Hits:
        """MultiTerm.matcher: no term, nothing; one term, that term; several, their OR in a
        context without weighting."""
        ix = self.ix
        terms = self._expand(node.regex, node.literal, node.prefix)
        if not terms:
            return EMPTY
        if len(terms) == 1:
            return self._term(terms[0], within)
        first, last = terms[0], terms[-1]
        if last - first == len(terms) - 1:  # consecutive terms: their postings are one slice
            lo, hi = int(ix.term_ptr[first]), int(ix.term_ptr[last + 1])
            leaves = _Leaves(ix.post_doc[lo:hi], ix.post_score[lo:hi], (ix.term_ptr[first:last + 2] - lo).tolist())
        else:
            spans = [(int(ix.term_ptr[t]), int(ix.term_ptr[t + 1])) for t in terms]
            leaves = _Leaves(np.concatenate([ix.post_doc[a:b] for a, b in spans]),
                             np.concatenate([ix.post_score[a:b] for a, b in spans]),
                             [0, *np.cumsum([b - a for a, b in spans]).tolist()])
        return self._union(leaves, np.diff(leaves.ptr).tolist(), node.boost, False, within,
                           positive=node.boost > 0, dense=dense)

    @staticmethod
    def _and_not(a: Hits, b_docs: DocArray, quirk: bool) -> Hits:
        if not len(a) or not len(b_docs):
            return a
        keep = ~_member(a.docs, b_docs, max(int(a.docs[-1]), int(b_docs[-1])) + 1)
        if quirk and b_docs[0] < a.docs[0] and not keep[0]:
            keep[0] = True  # AndNotMatcher._find_first: only an equal first page is looked at
        return Hits(a.docs[keep], a.scores[keep])

    def _pages_with_text(self) -> DocArray:
        if self._with_text is None:
            self._with_text = np.flatnonzero(self.ix.lengths > 0)
        return self._with_text

    # -- phrases ---------------------------------------------------------------------------

    def _phrase(self, node: Phrase, within: DocArray | None = None) -> Hits:
        """SpanNear2: the pages (among `within`) where each word comes 1 to slop positions after
        the one before, found from every occurrence of the words (page << 32 | position, each
        term's sorted); scored with the sum of the words' scores (a balanced tree)."""
        ix = self.ix
        ids = [ix.term(w.text) for w in node.words]
        if any(t < 0 for t in ids):
            return EMPTY  # Phrase.matcher: a word no page holds matches nothing
        reach: npt.NDArray[np.int64] | None = None
        for t in ids:
            keys = ix.occurrences[ix.pos_ptr[ix.term_ptr[t]]:ix.pos_ptr[ix.term_ptr[t + 1]]]
            if reach is None:
                reach = keys
            elif node.slop == 1:
                # occurrences right after a reached one: two sorted runs, merged by a stable sort
                both = np.concatenate((reach + 1, keys))
                both.sort(kind="stable")
                reach = both[1:][both[1:] == both[:-1]]
            else:
                j = np.searchsorted(reach, keys - 1, side="right") - 1
                ok = j >= 0
                ok[ok] = keys[ok] - reach[j[ok]] <= node.slop
                reach = keys[ok]
            if not len(reach):
                return EMPTY
        assert reach is not None
        pages = reach >> 32
        docs = pages[np.concatenate(([True], pages[1:] != pages[:-1]))]
        if within is not None:
            docs = docs[_member(docs, within, self.n)]
            if not len(docs):
                return EMPTY
        values = []
        for t in ids:
            lo, hi = ix.term_ptr[t], ix.term_ptr[t + 1]
            values.append(ix.post_score[lo + _positions(docs, ix.post_doc[lo:hi], self.n)[0]])
        scores = _sum(binary_tree(len(ids)), values)
        return Hits(docs, scores * node.boost if node.boost != 1.0 else scores)

    # -- prefixes and wildcards --------------------------------------------------------------

    def _expand_uncached(self, regex: str, literal: str, prefix: bool) -> tuple[int, ...]:
        """Ids of the terms a Prefix or Wildcard matches, in term order (Whoosh's _btexts)."""
        ix = self.ix
        if prefix:
            return tuple(ix.with_prefix(literal))
        candidates = ix.with_prefix(literal) if literal else range(len(ix.terms))
        match = re.compile(regex).match
        terms = ix.terms
        return tuple(i for i in candidates if match(terms[i]))

    # -- the other fields ----------------------------------------------------------------------

    def _field_docs(self, node: FieldTerm) -> DocArray:
        ix = self.ix
        if node.field == "file":
            if node.regex:
                pattern = re.compile(str(node.value))
                found = [d for d, name in enumerate(ix.doc_ids) if pattern.fullmatch(name)]
            else:
                d = bisect_left(ix.doc_ids, str(node.value))
                found = [d] if d < len(ix.doc_ids) and ix.doc_ids[d] == node.value else []
            if not found:
                return EMPTY.docs
            return np.concatenate([np.arange(ix.doc_start[d], ix.doc_start[d + 1], dtype=np.int64) for d in found])
        if node.field == "page_number":
            return np.flatnonzero(ix.page_numbers == int(node.value))
        if node.field == "total_pages":
            counts = np.diff(ix.doc_start)
            return np.flatnonzero(np.repeat(counts, counts) == int(node.value))
        return EMPTY.docs

    def _field(self, node: FieldTerm) -> Hits:
        docs = self._field_docs(node)
        if node.field == "file" and node.regex and len(docs):
            names = len(np.unique(np.searchsorted(self.ix.doc_start, docs, side="right")))
            if names == 1:
                return _constant(docs, 1.0)  # one expansion: that term, its boost dropped
            if names >= TOO_MANY_CLAUSES or (names > 2 and self.n <= ARRAY_UNION_MAX_PAGES):
                return _constant(docs, 1.0)  # ArrayUnionMatcher, unscored
        return _constant(docs, 1.0 * node.boost)  # not scorable: the weight, 1, times the boost
