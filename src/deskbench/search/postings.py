"""The page index on disk and in memory: Whoosh's postings, held as numpy arrays.

MADQA's official search tool is a Whoosh 2.7.4 index (one segment, pages added in order) searched
with BM25F. deskbench keeps the same information in a form numpy can search:

- **segments** (`seg-NNNNNN.npz`): what each ingest commit added, each page's terms as ids into
  the segment's own vocabulary, in text order. A document replaced later is dropped from the
  manifest's live map (and its segment rewritten away once enough of it is dead);
- the **compiled** index (`compiled-NNNNNN/`), built from the live pages when a writer closes
  (or, if it is missing or stale, when a searcher opens): pages in document-id then page order
  (Whoosh's document numbers), the sorted term list, for each term its pages and each page's
  BM25F score (Whoosh's formula, idf and quantised field lengths, computed once), and the
  positions of each term in each page for phrases. Arrays are memory-mapped when loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import tempfile
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from deskbench.search.analyzer import ANALYZER_NAME, index_terms

FORMAT = 3
"""Bumped when the files below change shape: an index of another format is rebuilt."""

B = 0.75
K1 = 1.2
"""whoosh.scoring.BM25F's defaults, the official tool's scoring."""

LENGTH_BYTES = array("i", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14,
    16, 17, 18, 20, 21, 23, 25, 26, 28, 30, 32, 34, 36, 38, 40, 42, 45, 47, 49, 52,
    54, 57, 60, 63, 66, 69, 72, 75, 79, 82, 86, 89, 93, 97, 101, 106, 110, 114,
    119, 124, 129, 134, 139, 145, 150, 156, 162, 169, 175, 182, 189, 196, 203, 211,
    219, 227, 235, 244, 253, 262, 271, 281, 291, 302, 313, 324, 336, 348, 360, 373,
    386, 399, 414, 428, 443, 459, 475, 491, 508, 526, 544, 563, 583, 603, 623, 645,
    667, 690, 714, 738, 763, 789, 816, 844, 873, 903, 933, 965, 998, 1032, 1066,
    1103, 1140, 1178, 1218, 1259, 1302, 1345, 1391, 1438, 1486, 1536, 1587, 1641,
    1696, 1753, 1811, 1872, 1935, 1999, 2066, 2135, 2207, 2280, 2356, 2435, 2516,
    2600, 2687, 2777, 2869, 2965, 3063, 3165, 3271, 3380, 3492, 3608, 3728, 3852,
    3980, 4112, 4249, 4390, 4536, 4686, 4842, 5002, 5168, 5340, 5517, 5700, 5889,
    6084, 6286, 6494, 6709, 6932, 7161, 7398, 7643, 7897, 8158, 8428, 8707, 8995,
    9293, 9601, 9918, 10247, 10586, 10936, 11298, 11671, 12057, 12456, 12868,
    13294, 13733, 14187, 14656, 15141, 15641, 16159, 16693, 17244, 17814, 18403,
    19011, 19640, 20289, 20959, 21652, 22367, 23106, 23869, 24658, 25472, 26314,
    27183, 28081, 29009, 29967, 30957, 31979, 33035, 34126, 35254, 36418, 37620,
    38863, 40146, 41472, 42841, 44256, 45717, 47227, 48786, 50397, 52061, 53780,
    55556, 57390, 59285, 61242, 63264, 65352, 67510, 69739, 72041, 74419, 76876,
    79414, 82035, 84743, 87541, 90430, 93416, 96499, 99684, 102975, 106374])
"""whoosh.util.numeric._length_byte_cache: Whoosh stores a field's length in one byte, the index
of the first of these values >= the length (255 from 106374 on), and scores with that value."""

IntArray = npt.NDArray[np.int32]
LongArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def quantised_lengths(lengths: npt.NDArray[np.integer]) -> FloatArray:
    """byte_to_length(length_to_byte(n)) for each length (0 stays 0: such a page has no term)."""
    table = np.asarray(LENGTH_BYTES, dtype=np.int64)
    return table[np.minimum(np.searchsorted(table, lengths, side="left"), 255)].astype(np.float64)


def idf(doc_count: int, doc_frequency: int) -> float:
    """whoosh.scoring.WeightingModel.idf, with math.log as there."""
    return math.log(doc_count / (doc_frequency + 1)) + 1


def bm25_scores(idfs: FloatArray, tf: FloatArray, fl: FloatArray, avgfl: float) -> FloatArray:
    """whoosh.scoring.bm25 elementwise, its operations in its order (IEEE results equal)."""
    return idfs * ((tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * fl / avgfl)))


# -- segments: what a commit added -------------------------------------------------------------


@dataclass
class Segment:
    """The pages of some documents, their terms as ids into `vocab`, in text order."""

    docs: list[str]
    doc_pages: IntArray  # pages of each document
    page_numbers: IntArray  # each page's number, documents one after the other
    page_lengths: IntArray  # terms on each page
    tokens: IntArray  # every page's term ids, pages one after the other
    vocab: list[str]

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        with open(tmp, "wb") as f:
            np.savez(
                f, doc_pages=self.doc_pages, page_numbers=self.page_numbers, page_lengths=self.page_lengths,
                tokens=self.tokens, vocab=np.frombuffer("\n".join(self.vocab).encode(), dtype=np.uint8),
                docs=np.frombuffer(json.dumps(self.docs).encode(), dtype=np.uint8))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Segment:
        with np.load(path) as z:
            vocab_text = z["vocab"].tobytes().decode()
            return cls(
                docs=json.loads(z["docs"].tobytes().decode()),
                doc_pages=z["doc_pages"], page_numbers=z["page_numbers"], page_lengths=z["page_lengths"],
                tokens=z["tokens"], vocab=vocab_text.split("\n") if vocab_text else [])


class SegmentBuilder:
    """Turns page texts into a segment: Whoosh's analyzer, terms numbered as they come. A
    document given twice keeps its last pages."""

    def __init__(self) -> None:
        # per document: page numbers, terms per page, and its term ids (4 bytes each, not a
        # Python int each: a whole corpus can wait here for its first commit)
        self.pages: dict[str, tuple[list[int], list[int], array[int]]] = {}
        self.ids: dict[str, int] = {}

    def add(self, doc_id: str, pages: Sequence[tuple[int, str]]) -> None:
        ids = self.ids
        setdefault = ids.setdefault
        numbers, lengths, tokens = [], [], array("i")
        for number, text in pages:
            chunk = [setdefault(t, len(ids)) for t in index_terms(text)]
            numbers.append(number)
            lengths.append(len(chunk))
            tokens.extend(chunk)
        self.pages.pop(doc_id, None)
        self.pages[doc_id] = (numbers, lengths, tokens)

    def remove(self, doc_id: str) -> None:
        self.pages.pop(doc_id, None)

    def __len__(self) -> int:
        return len(self.pages)

    def build(self) -> Segment:
        docs = list(self.pages)
        numbers = [n for ns, _, _ in self.pages.values() for n in ns]
        lengths = [n for _, ls, _ in self.pages.values() for n in ls]
        parts = [np.frombuffer(t, dtype=np.int32) for _, _, t in self.pages.values() if len(t)]
        tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        return Segment(docs, np.asarray([len(ns) for ns, _, _ in self.pages.values()], dtype=np.int32),
                       np.asarray(numbers, dtype=np.int32), np.asarray(lengths, dtype=np.int32), tokens,
                       list(self.ids))


def merge_segments(segments: Sequence[Segment], live: Sequence[Sequence[bool]]) -> Segment:
    """One segment holding the live documents of `segments`, its vocabulary theirs joined."""
    vocab: dict[str, int] = {}
    docs, doc_pages, numbers, lengths, tokens = [], [], [], [], []
    for seg, flags in zip(segments, live, strict=True):
        local = np.fromiter((vocab.setdefault(t, len(vocab)) for t in seg.vocab), dtype=np.int32,
                            count=len(seg.vocab))
        page_starts = np.concatenate(([0], np.cumsum(seg.doc_pages, dtype=np.int64)))
        token_starts = np.concatenate(([0], np.cumsum(seg.page_lengths, dtype=np.int64)))
        for d, ok in enumerate(flags):
            if not ok:
                continue
            p0, p1 = page_starts[d], page_starts[d + 1]
            docs.append(seg.docs[d])
            doc_pages.append(int(p1 - p0))
            numbers.append(seg.page_numbers[p0:p1])
            lengths.append(seg.page_lengths[p0:p1])
            tokens.append(local[seg.tokens[token_starts[p0]:token_starts[p1]]])

    def joined(parts: list[IntArray]) -> IntArray:
        return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, dtype=np.int32)

    return Segment(docs, np.asarray(doc_pages, dtype=np.int32), joined(numbers), joined(lengths), joined(tokens),
                   list(vocab))


# -- the compiled index ------------------------------------------------------------------------


@dataclass
class Compiled:
    """Everything a search reads. Pages are numbered as Whoosh numbers them (documents by id,
    pages in order); postings of a term are in page order."""

    terms: tuple[str, ...]  # sorted (a tuple: the garbage collector stops visiting it)
    term_ptr: LongArray  # postings of term t: [term_ptr[t], term_ptr[t + 1])
    post_doc: LongArray  # the page of each posting
    post_score: FloatArray  # its BM25F score
    pos_ptr: LongArray  # occurrences of posting i: occurrences[pos_ptr[i]:pos_ptr[i + 1]]
    occurrences: LongArray  # page << 32 | position (Whoosh's, the stop words not counted): a term's are sorted
    lengths: IntArray  # terms on each page (exact, as Whoosh sums them)
    doc_ids: tuple[str, ...]
    doc_start: LongArray  # pages of document d: [doc_start[d], doc_start[d + 1])
    page_numbers: IntArray

    @property
    def n_pages(self) -> int:
        return len(self.lengths)

    def term(self, text: str) -> int:
        """The id of a term, -1 if no page holds it."""
        i = bisect_left(self.terms, text)
        return i if i < len(self.terms) and self.terms[i] == text else -1

    def with_prefix(self, prefix: str) -> range:
        """Ids of the terms starting with `prefix` (Whoosh's expand_prefix), in term order."""
        lo = bisect_left(self.terms, prefix)
        hi = lo
        terms = self.terms
        while hi < len(terms) and terms[hi].startswith(prefix):
            hi += 1
        return range(lo, hi)

    def doc_frequency(self, t: int) -> int:
        return int(self.term_ptr[t + 1] - self.term_ptr[t])

    # -- files --

    ARRAYS = ("term_ptr", "post_doc", "post_score", "pos_ptr", "occurrences", "lengths", "doc_start", "page_numbers")

    def save(self, folder: Path) -> None:
        """Write to `folder` (made here) through a temporary folder renamed into place."""
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
        try:
            for name in self.ARRAYS:
                np.save(tmp / f"{name}.npy", getattr(self, name))
            (tmp / "terms.txt").write_bytes("\n".join(self.terms).encode())
            (tmp / "docs.json").write_text(json.dumps(self.doc_ids))
            os.rename(tmp, folder)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not folder.is_dir():
                raise

    @classmethod
    def load(cls, folder: Path) -> Compiled:
        # memory-mapped, seen as plain arrays (np.memmap's own indexing costs a Python call)
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r").view(np.ndarray) for name in cls.ARRAYS}
        text = (folder / "terms.txt").read_bytes().decode()
        return cls(terms=tuple(text.split("\n")) if text else (),
                   doc_ids=tuple(json.loads((folder / "docs.json").read_text())), **arrays)


def compile_segments(segments: Sequence[Segment], live: Sequence[Sequence[bool]]) -> Compiled:
    """The compiled index of the live documents of `segments` (live[s][d]: is document d of
    segment s current)."""
    entries: list[tuple[str, int, int]] = sorted(
        (doc, s, d) for s, seg in enumerate(segments) for d, doc in enumerate(seg.docs) if live[s][d])
    page_starts = [np.concatenate(([0], np.cumsum(seg.doc_pages, dtype=np.int64))) for seg in segments]
    token_starts = [np.concatenate(([0], np.cumsum(seg.page_lengths, dtype=np.int64))) for seg in segments]
    # The vocabulary of the live pages, sorted; each segment's ids mapped to it.
    used_local: list[npt.NDArray[np.bool_]] = [np.zeros(len(seg.vocab), dtype=bool) for seg in segments]
    for _, s, d in entries:
        p0, p1 = page_starts[s][d], page_starts[s][d + 1]
        used_local[s][segments[s].tokens[token_starts[s][p0]:token_starts[s][p1]]] = True
    vocab: set[str] = set()
    for seg, used in zip(segments, used_local, strict=True):
        vocab.update(seg.vocab[i] for i in np.flatnonzero(used))
    terms = sorted(vocab)
    rank = {t: i for i, t in enumerate(terms)}
    maps = [np.fromiter((rank.get(t, -1) for t in seg.vocab), dtype=np.int32, count=len(seg.vocab))
            for seg in segments]
    token_parts, length_parts, number_parts, doc_start = [], [], [], [0]
    for _, s, d in entries:
        seg = segments[s]
        p0, p1 = page_starts[s][d], page_starts[s][d + 1]
        token_parts.append(maps[s][seg.tokens[token_starts[s][p0]:token_starts[s][p1]]])
        length_parts.append(seg.page_lengths[p0:p1])
        number_parts.append(seg.page_numbers[p0:p1])
        doc_start.append(doc_start[-1] + int(p1 - p0))
    n_pages = doc_start[-1]
    tokens = np.concatenate(token_parts) if token_parts else np.zeros(0, dtype=np.int32)
    lengths = np.concatenate(length_parts).astype(np.int32) if length_parts else np.zeros(0, dtype=np.int32)
    page_of_token = np.repeat(np.arange(n_pages, dtype=np.int32), lengths)
    first_token = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)[:-1])) if n_pages else np.zeros(0, np.int64)
    position = (np.arange(len(tokens), dtype=np.int64) - np.repeat(first_token, lengths)).astype(np.int32)
    # Tokens are in page then position order: a stable sort by term gives (term, page, position).
    order = np.argsort(tokens, kind="stable")
    sorted_terms, sorted_pages, positions = tokens[order], page_of_token[order], position[order]
    del order, tokens, page_of_token, position
    if len(sorted_terms):
        new = np.empty(len(sorted_terms), dtype=bool)
        new[0] = True
        np.not_equal(sorted_terms[1:], sorted_terms[:-1], out=new[1:])
        new[1:] |= sorted_pages[1:] != sorted_pages[:-1]
        starts = np.flatnonzero(new)
    else:
        starts = np.zeros(0, dtype=np.int64)
    pos_ptr = np.concatenate((starts, [len(sorted_terms)])).astype(np.int64)
    post_term = sorted_terms[starts]
    post_doc = sorted_pages[starts].astype(np.int64)  # numpy indexes with int64 (intp) without a copy
    tf = np.diff(pos_ptr).astype(np.float64)
    df = np.bincount(post_term, minlength=len(terms)) if len(terms) else np.zeros(0, dtype=np.int64)
    term_ptr = np.concatenate(([0], np.cumsum(df, dtype=np.int64)))
    by_df = {int(n): idf(n_pages, int(n)) for n in np.unique(df)}
    term_idf = np.fromiter((by_df[int(n)] for n in df), dtype=np.float64, count=len(df))
    avgfl = (int(lengths.sum()) / (n_pages or 1)) or 1  # Searcher.avg_field_length, `or 1` as BM25FScorer
    fl = quantised_lengths(lengths)[post_doc]
    post_score = bm25_scores(term_idf[post_term], tf, fl, avgfl)
    return Compiled(
        terms=tuple(terms), term_ptr=term_ptr, post_doc=post_doc, post_score=post_score, pos_ptr=pos_ptr,
        occurrences=(sorted_pages.astype(np.int64) << 32) | positions, lengths=lengths,
        doc_ids=tuple(e[0] for e in entries),
        doc_start=np.asarray(doc_start, dtype=np.int64),
        page_numbers=np.concatenate(number_parts).astype(np.int32) if number_parts else np.zeros(0, np.int32))


# -- the folder --------------------------------------------------------------------------------


@dataclass
class Manifest:
    """Which segments exist and which segment holds each document's current pages."""

    generation: int = 0
    segments: list[str] | None = None
    live: dict[str, str] | None = None

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = folder / "manifest.json"
        if not path.exists():
            return cls(0, [], {})
        data = json.loads(path.read_text())
        return cls(int(data["generation"]), list(data["segments"]), dict(data["live"]))

    def write(self, folder: Path) -> None:
        tmp = folder / f"manifest.json.tmp-{os.getpid()}"
        tmp.write_text(json.dumps({"generation": self.generation, "segments": self.segments, "live": self.live}))
        os.replace(tmp, folder / "manifest.json")


def write_meta(folder: Path) -> None:
    (folder / "meta.json").write_text(json.dumps({"analyzer": ANALYZER_NAME, "format": FORMAT}) + "\n")


def compiled_folder(folder: Path, generation: int) -> Path:
    return folder / f"compiled-{generation:06d}"


def load_segments(folder: Path, manifest: Manifest) -> tuple[list[Segment], list[list[bool]]]:
    names = manifest.segments or []
    live = manifest.live or {}
    segments = [Segment.load(folder / f"{name}.npz") for name in names]
    flags = [[live.get(doc) == name for doc in seg.docs] for name, seg in zip(names, segments, strict=True)]
    return segments, flags


def build_compiled(folder: Path, manifest: Manifest) -> Compiled:
    segments, live = load_segments(folder, manifest)
    return compile_segments(segments, live)


@contextlib.contextmanager
def writer_lock(folder: Path) -> Iterator[bool]:
    """Hold the folder's writer lock; yields False when another process holds it."""
    with open(folder / "writer.lock", "a+b") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def remove_stale(folder: Path, keep: set[str]) -> None:
    """Delete segments and compiled folders the manifest no longer names (readers holding them
    mapped keep their data: unlinked files live on while mapped)."""
    for path in folder.iterdir():
        if path.name in keep or path.name in ("meta.json", "manifest.json", "writer.lock"):
            continue
        if path.name.startswith("compiled-") or path.name.startswith("seg-") or ".tmp-" in path.name:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
