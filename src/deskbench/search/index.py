"""The page index: one entry per PDF page, searched as MADQA's official Whoosh tool searches.

Writes come from one process at a time (a lock file in the index folder); searches may run from
any number of threads: the compiled index is immutable, and a reload swaps it whole. See
postings.py for the files and scoring.py for the matching and scoring.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deskbench.errors import UserError
from deskbench.search.analyzer import ANALYZER_NAME
from deskbench.search.postings import (
    FORMAT,
    Compiled,
    Manifest,
    SegmentBuilder,
    build_compiled,
    compile_segments,
    compiled_folder,
    load_segments,
    merge_segments,
    remove_stale,
    write_meta,
    writer_lock,
)
from deskbench.search.query import Highlights, highlights, parse_query
from deskbench.search.scoring import Searcher

MERGE_SEGMENTS = 8
"""More segments than this (or more dead pages than live ones) are merged into one at a writer's close."""


@dataclass(frozen=True)
class ScoredPage:
    document: str
    page: int
    score: float


@dataclass(frozen=True)
class SearchResult:
    pages: list[ScoredPage]
    highlights: Highlights


def index_analyzer(path: Path) -> str | None:
    """The text analyzer an index on disk was built with (None if unreadable); a tantivy index
    of an earlier deskbench names its tokenizer."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        if "analyzer" in meta:
            return str(meta["analyzer"]) if meta.get("format") == FORMAT else f"{meta['analyzer']} format {meta.get('format')}"
        for f in meta["schema"]:
            if f.get("name") == "text":
                return str(f["options"]["indexing"]["tokenizer"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


class PageIndex:
    """Open (or create) the index folder of a corpus."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if create:
            path.mkdir(parents=True, exist_ok=True)
            if not (path / "meta.json").exists():
                write_meta(path)
        elif not (path / "meta.json").exists():
            raise UserError(
                f"no search index at {path}; run 'deskbench ingest' to build it "
                "(with the same PDFs: unchanged files are only re-indexed)"
            )
        found = index_analyzer(path)
        if found != ANALYZER_NAME:
            raise UserError(
                f"the search index at {path} was built by another deskbench version (analyzer {found}, now "
                f"{ANALYZER_NAME}: Whoosh's own analyzer and scoring); run 'deskbench ingest' "
                "on the corpus again to rebuild it from the page store (unchanged PDFs are not re-read)"
            )
        self._lock = threading.Lock()
        self._searcher: Searcher | None = None

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def writer(self) -> Iterator[IndexWriter]:
        """Replace or delete documents; each commit is durable, and the compiled index is
        rebuilt once, when the block ends without an error."""
        with ExitStack() as stack:
            if not stack.enter_context(writer_lock(self.path)):
                raise UserError(
                    f"another process is writing the index at {self.path}; "
                    "wait for that ingest to finish, then run again"
                )
            w = IndexWriter(self.path)
            try:
                yield w
                w.commit()
                w.finish()
            finally:
                self.reload()

    def reload(self) -> None:
        with self._lock:
            self._searcher = None

    # -- reading -------------------------------------------------------------------------

    def searcher(self) -> Searcher:
        """The searcher over the current compiled index (compiled now if a writer did not)."""
        with self._lock:
            if self._searcher is None:
                self._searcher = Searcher(self._compiled())
            return self._searcher

    def _compiled(self) -> Compiled:
        manifest = Manifest.read(self.path)
        folder = compiled_folder(self.path, manifest.generation)
        if folder.is_dir():
            try:
                return Compiled.load(folder)
            except (OSError, ValueError) as exc:
                if Manifest.read(self.path).generation != manifest.generation:
                    return self._compiled()  # a writer replaced it while it was being read
                raise UserError(
                    f"search index at {self.path} is unreadable ({exc}); "
                    "delete that folder and run 'deskbench ingest' again to rebuild it"
                ) from exc
        compiled = build_compiled(self.path, manifest)  # a writer stopped before compiling
        with writer_lock(self.path) as got:
            if got and Manifest.read(self.path).generation == manifest.generation and manifest.segments:
                compiled.save(folder)
        return compiled

    def num_pages(self) -> int:
        return self.searcher().n

    def search(self, query: str, k: int = 5, *, strict: bool = False) -> SearchResult:
        """Whoosh's top-k pages for a Whoosh-syntax query, parsed as Whoosh parses it (BM25F,
        ties by page order); strict raises QuerySyntaxError where Whoosh would repair or drop
        part of the query."""
        tree = parse_query(query, strict=strict)
        hl = highlights(tree)
        if k < 1:
            return SearchResult([], hl)
        searcher = self.searcher()
        ix = searcher.ix
        top = searcher.top(tree, k)
        found = np.asarray([doc for doc, _ in top], dtype=np.int64)
        docs = (np.searchsorted(ix.doc_start, found, side="right") - 1).tolist()
        numbers = ix.page_numbers[found].tolist()
        pages = [ScoredPage(ix.doc_ids[d], n, score) for d, n, (_, score) in zip(docs, numbers, top, strict=True)]
        return SearchResult(pages, hl)


class IndexWriter:
    """Replace the pages of whole documents; a commit writes them as a new segment."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.manifest = Manifest.read(path)
        self._builder = SegmentBuilder()
        self._deleted: set[str] = set()

    def replace_document(self, doc_id: str, pages: Iterable[tuple[int, str]]) -> None:
        self._deleted.discard(doc_id)
        self._builder.add(doc_id, list(pages))

    def delete_document(self, doc_id: str) -> None:
        self._builder.remove(doc_id)
        self._deleted.add(doc_id)

    def commit(self) -> None:
        if not len(self._builder) and not self._deleted:
            return
        m = self.manifest
        segments, live = list(m.segments or []), dict(m.live or {})
        for doc in self._deleted:
            live.pop(doc, None)
        if len(self._builder):
            name = f"seg-{m.generation + 1:06d}"
            segment = self._builder.build()
            segment.save(self.path / f"{name}.npz")
            segments.append(name)
            for doc in segment.docs:
                live[doc] = name
        self.manifest = Manifest(m.generation + 1, [s for s in segments if s in set(live.values())], live)
        self.manifest.write(self.path)
        self._builder, self._deleted = SegmentBuilder(), set()

    def finish(self) -> None:
        """Compile the index of the live pages (merging the segments when many or mostly dead)
        and delete what the manifest no longer names."""
        m = self.manifest
        folder = compiled_folder(self.path, m.generation)
        if not folder.is_dir():
            segments, live = load_segments(self.path, m)
            dead = sum(int(p) for seg, flags in zip(segments, live, strict=True)
                       for p, ok in zip(seg.doc_pages, flags, strict=True) if not ok)
            alive = sum(int(p) for seg, flags in zip(segments, live, strict=True)
                        for p, ok in zip(seg.doc_pages, flags, strict=True) if ok)
            if len(segments) > MERGE_SEGMENTS or (len(segments) > 1 and dead > alive):
                merged = merge_segments(segments, live)
                name = f"seg-{m.generation + 1:06d}"
                merged.save(self.path / f"{name}.npz")
                m = self.manifest = Manifest(m.generation + 1, [name], {doc: name for doc in merged.docs})
                m.write(self.path)
                segments, live = [merged], [[True] * len(merged.docs)]
                folder = compiled_folder(self.path, m.generation)
            compile_segments(segments, live).save(folder)
        remove_stale(self.path, {folder.name, *(f"{s}.npz" for s in m.segments or [])})
