"""Whoosh 2.7.4's matching and BM25F scoring of a parsed query, over the compiled index.

Each query node gives the pages it matches and their scores as whoosh.searching.Searcher.search
computes them for MADQA's official tool (default BM25F), the result list being the top k by
score, ties by page number (Whoosh's document number). What Whoosh's matchers add, and in which
order (float sums depend on it), is done here too:

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
what Whoosh returns when none of these fire (most queries; see tests/test_whoosh_parity.py).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache

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
_STRIDE = 1 << 32  # phrase keys: candidate * _STRIDE + position
EXACT_FOLD_LEAVES = 8
"""An OR of up to this many clauses whose tree is not a chain is summed in the tree's order."""
_FIRST_BATCH = 512  # phrase candidates checked first for a top k (then 8 times more each round)


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
        return among[at] == docs
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


def top_of(h: Hits, k: int) -> list[tuple[int, float]]:
    """The first k (page, score): best score first, ties by page (TopCollector's order)."""
    m = len(h)
    if m == 0 or k < 1:
        return []
    picked = np.arange(m) if m <= k else np.flatnonzero(h.scores >= np.partition(h.scores, m - k)[m - k])
    order = picked[np.lexsort((h.docs[picked], -h.scores[picked]))[:k]]
    return list(zip(h.docs[order].tolist(), h.scores[order].tolist(), strict=True))


# -- Whoosh's matcher tree shapes -----------------------------------------------------------------


@dataclass
class _Tree:
    """A node of make_weighted_tree / make_binary_tree: a leaf index or two subtrees."""

    leaf: int = -1
    left: _Tree | None = None
    right: _Tree | None = None


def weighted_tree(weights: list[int]) -> _Tree:
    """whoosh.util.make_weighted_tree's shape: sort (stably: matchers compare equal) by weight,
    join the first two, insert the pair after the items of equal weight."""
    items = sorted(((w, _Tree(leaf=i)) for i, w in enumerate(weights)), key=lambda x: x[0])
    keys = [w for w, _ in items]
    nodes = [t for _, t in items]
    while len(nodes) > 1:
        w = keys.pop(0) + keys.pop(0)
        a, b = nodes.pop(0), nodes.pop(0)
        at = bisect_right(keys, w)
        keys.insert(at, w)
        nodes.insert(at, _Tree(left=a, right=b))
    return nodes[0]


def binary_tree(n: int, lo: int = 0) -> _Tree:
    """whoosh.util.make_binary_tree's shape over n leaves: halves, the first half the smaller."""
    if n == 1:
        return _Tree(leaf=lo)
    half = n // 2
    return _Tree(left=binary_tree(half, lo), right=binary_tree(n - half, lo + half))


def _sum(tree: _Tree, values: list[FloatArray]) -> FloatArray:
    """The tree's sums where every leaf has a value (left + right at each node)."""
    if tree.leaf >= 0:
        return values[tree.leaf]
    assert tree.left is not None and tree.right is not None
    return _sum(tree.left, values) + _sum(tree.right, values)


def _sum_present(tree: _Tree, values: FloatArray, present: set[int]) -> FloatArray | None:
    """The tree's sums over the rows of `values` (a column per leaf, NaN where absent): a node
    with one side is that side; None for a subtree with no leaf in `present`."""
    if tree.leaf >= 0:
        return values[:, tree.leaf] if tree.leaf in present else None
    assert tree.left is not None and tree.right is not None
    a, b = _sum_present(tree.left, values, present), _sum_present(tree.right, values, present)
    if a is None or b is None:
        return b if a is None else a
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, a + b))


def _chain(tree: _Tree) -> list[int] | None:
    """The leaves bottom-up when each node has at most one non-leaf side: then adding a page's
    scores one by one in this order is the tree's sum (a + b = b + a at each node)."""
    if tree.leaf >= 0:
        return [tree.leaf]
    assert tree.left is not None and tree.right is not None
    if tree.left.leaf >= 0 and tree.right.leaf >= 0:
        return [tree.left.leaf, tree.right.leaf]
    inner, leaf = (tree.left, tree.right) if tree.right.leaf >= 0 else (tree.right, tree.left)
    if leaf.leaf < 0:
        return None
    below = _chain(inner)
    return None if below is None else [*below, leaf.leaf]


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
        if isinstance(node, Phrase):
            return self._phrase_top(node, k)
        # Searcher.search uses a TopCollector when k < the page count; its first step, on a
        # matcher with block qualities, is skip_to_quality(0), which an ANDNOT at the root
        # (and down its first operand) answers with a full _find_next: no first-page quirk there.
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
            hits = [self._eval(c, scored, within=within) for c in node.should]
            leaves = _Leaves(np.concatenate([h.docs for h in hits]), np.concatenate([h.scores for h in hits]),
                             [0, *np.cumsum([len(h) for h in hits]).tolist()])
            return self._union(leaves, [self.size(c) for c in node.should], node.boost, scored, within)
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
        values: list[FloatArray | None] = [None] * len(children)
        values[order[0]] = first.scores
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
                values[i] = np.ones(len(docs))
                if t >= 0:
                    values[i][_member(docs, ix.post_doc[ix.term_ptr[t]:ix.term_ptr[t + 1]], self.n)] = np.nan  # type: ignore[index]
                continue
            known = [j for j, v in enumerate(values) if v is not None]
            ok = ~np.isnan(sum(values[j] for j in known))  # type: ignore[arg-type]
            if not ok.all():
                docs = docs[ok]
                for j in known:
                    values[j] = values[j][ok]  # type: ignore[index]
            h = self._eval(c, scored, within=docs)
            if len(h) != len(docs):
                keep = _member(docs, h.docs, self.n)
                docs = h.docs
                for j in known:
                    values[j] = values[j][keep]  # type: ignore[index]
            values[i] = h.scores
        scores = _sum(weighted_tree([-n for n in sizes]), values)  # type: ignore[arg-type]
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
               within: DocArray | None = None) -> Hits:
        """A tree of UnionMatchers (or Whoosh's ArrayUnionMatcher) over the leaves' pages (those
        among `within` only, when given). A page's scores are added one by one, in the tree's
        order when it is a chain; otherwise the pages in 3 or more leaves get the tree's sum
        (up to EXACT_FOLD_LEAVES leaves; beyond, their sums can differ in the last bit)."""
        n = len(sizes)
        array_union = not (n < TOO_MANY_CLAUSES and (n == 2 or self.n > ARRAY_UNION_MAX_PAGES))
        tree = None if array_union else weighted_tree(sizes)
        chain = None if tree is None else _chain(tree)
        rows, weights = leaves.docs, leaves.scores
        if chain is not None and chain != sorted(chain):
            rows = np.concatenate([leaves.docs[leaves.ptr[i]:leaves.ptr[i + 1]] for i in chain])
            weights = np.concatenate([leaves.scores[leaves.ptr[i]:leaves.ptr[i + 1]] for i in chain])
        fold = tree is not None and chain is None and n <= EXACT_FOLD_LEAVES
        leaf_of = np.repeat(np.arange(n), np.diff(leaves.ptr)) if fold else None
        universe = self._all if within is None else within
        if within is not None:  # rows: indexes into `within`
            at, found = _positions(rows, within, self.n)
            rows, weights = at[found], weights[found]
            leaf_of = None if leaf_of is None else leaf_of[found]
        count = np.bincount(rows, minlength=len(universe))
        if array_union and not scored:
            return _constant(universe[count > 0], 1.0)  # a[i] = 1: no scores
        if array_union and boost != 1.0:
            weights = weights * boost  # a[i] += m.score() * boost
        acc = np.bincount(rows, weights=weights, minlength=len(universe))  # added one by one
        if leaf_of is not None:
            many = count >= 3  # only pages in 3 or more leaves can depend on the order of adding
            if many.any():
                assert tree is not None
                picked = many[rows]
                where = np.cumsum(many) - 1
                table = np.full((int(many.sum()), n), np.nan)
                table[where[rows[picked]], leaf_of[picked]] = weights[picked]
                summed = _sum_present(tree, table, set(np.unique(leaf_of[picked]).tolist()))
                assert summed is not None
                acc[many] = summed
        found = np.flatnonzero(acc > 0) if array_union else np.flatnonzero(count > 0)
        scores = acc[found]
        return Hits(universe[found], scores * boost if boost != 1.0 and not array_union else scores)

    def _wildcard(self, node: Wildcard, within: DocArray | None) -> Hits:
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
        return self._union(leaves, np.diff(leaves.ptr).tolist(), node.boost, False, within)

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

    def _phrase_candidates(self, node: Phrase, within: DocArray | None) -> tuple[DocArray, list[npt.NDArray[np.int64]]] | None:
        """The pages holding every word (among `within`), and each word's posting there."""
        ix = self.ix
        ids = [ix.term(w.text) for w in node.words]
        if any(t < 0 for t in ids):
            return None  # Phrase.matcher: a word no page holds matches nothing
        spans = [(int(ix.term_ptr[t]), int(ix.term_ptr[t + 1])) for t in ids]
        order = sorted(range(len(spans)), key=lambda i: spans[i][1] - spans[i][0])
        rarest = order[0]
        lo, hi = spans[rarest]
        docs = ix.post_doc[lo:hi]
        at: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)] * len(spans)
        at[rarest] = np.arange(lo, hi)
        if within is not None:
            keep = _member(docs, within, self.n)
            docs, at[rarest] = docs[keep], at[rarest][keep]
        for i in order[1:]:
            lo, hi = spans[i]
            where, found = _positions(docs, ix.post_doc[lo:hi], self.n)
            if not found.all():
                docs = docs[found]
                where = where[found]
                for j in order[:order.index(i)]:
                    at[j] = at[j][found]
            at[i] = lo + where
            if not len(docs):
                return None
        return docs, at

    def _phrase_scores(self, node: Phrase, at: list[npt.NDArray[np.int64]]) -> FloatArray:
        scores = _sum(binary_tree(len(at)), [self.ix.post_score[idx] for idx in at])
        return scores * node.boost if node.boost != 1.0 else scores

    def _phrase_holds(self, at: list[npt.NDArray[np.int64]], pick: npt.NDArray[np.intp] | None, slop: int) -> BoolArray:
        """Which candidates (`pick` of them, all when None) hold the words in order, each 1 to
        slop positions after the one before (SpanNear2, ordered, mindist 1)."""
        ix = self.ix
        reach: npt.NDArray[np.int64] | None = None
        size = len(at[0]) if pick is None else len(pick)
        base = np.arange(size, dtype=np.int64) * _STRIDE
        for idx in at:
            postings = idx if pick is None else idx[pick]
            starts = ix.pos_ptr[postings]
            counts = ix.pos_ptr[postings + 1] - starts
            flat = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
            keys = np.repeat(base, counts) + ix.positions[flat]
            if reach is not None and slop == 1:
                # keys right after a reached one: both lists sorted, so a stable sort merges them
                both = np.concatenate((reach + 1, keys))
                both.sort(kind="stable")
                keys = both[1:][both[1:] == both[:-1]]
            elif reach is not None:
                j = np.searchsorted(reach, keys - 1, side="right") - 1
                ok = j >= 0
                ok[ok] = keys[ok] - reach[j[ok]] <= slop
                keys = keys[ok]
            reach = keys
            if not len(reach):
                break
        held = np.zeros(size, dtype=bool)
        assert reach is not None
        held[reach >> 32] = True  # _STRIDE = 1 << 32
        return held

    def _phrase(self, node: Phrase, within: DocArray | None = None) -> Hits:
        found = self._phrase_candidates(node, within)
        if found is None:
            return EMPTY
        docs, at = found
        held = self._phrase_holds(at, None, node.slop)
        return Hits(docs[held], self._phrase_scores(node, [idx[held] for idx in at]))

    def _phrase_top(self, node: Phrase, k: int) -> list[tuple[int, float]]:
        """A phrase's top k: its best-scoring candidates checked first, more each round, until
        k of them hold the phrase (no candidate left unchecked can then rank above them)."""
        found = self._phrase_candidates(node, None)
        if found is None:
            return []
        docs, at = found
        scores = self._phrase_scores(node, at)
        batch = _FIRST_BATCH
        while batch * 8 < len(docs):
            cut = np.partition(scores, len(docs) - batch)[len(docs) - batch]
            pick = np.flatnonzero(scores >= cut)  # ties at the cut included
            held = pick[self._phrase_holds(at, pick, node.slop)]
            if len(held) >= k:
                return top_of(Hits(docs[held], scores[held]), k)
            batch *= 8
        held = np.flatnonzero(self._phrase_holds(at, None, node.slop))
        return top_of(Hits(docs[held], scores[held]), k)

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
