"""The page-level tantivy index: one tantivy document per PDF page.

Writes come from one ingest process at a time (tantivy holds a writer lock); searches may run
from any number of threads: each call takes its own searcher from the shared index.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tantivy

from deskbench.errors import UserError
from deskbench.search.analyzer import ANALYZER_NAME, build_analyzer, index_form
from deskbench.search.nodes import FieldName
from deskbench.search.query import Highlights, Wildcard, highlights, parse_query, to_tantivy

TEXT = "text"
DOC = "doc_id"
PAGE = "page"
TOTAL_PAGES = "total_pages"
FIELDS: dict[FieldName, str] = {"text": TEXT, "file": DOC, "page_number": PAGE, "total_pages": TOTAL_PAGES}
"""The official index schema's fields (file, page_number, total_pages, text) in this index."""


MAX_WILDCARD_TERMS = 512
"""A wildcard matching more index terms than this is matched with a constant score instead."""

MAX_TIE_CANDIDATES = 512
"""How far past k the search reads to break score ties by (document, page)."""


@dataclass(frozen=True)
class ScoredPage:
    document: str
    page: int
    score: float


@dataclass(frozen=True)
class SearchResult:
    pages: list[ScoredPage]
    highlights: Highlights


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field(DOC, stored=True, tokenizer_name="raw")
    sb.add_integer_field(PAGE, stored=True, indexed=True, fast=True)
    sb.add_integer_field(TOTAL_PAGES, stored=False, indexed=True)
    # The text itself lives in the page store; not storing it here makes indexing ~25% faster.
    sb.add_text_field(TEXT, stored=False, tokenizer_name=ANALYZER_NAME, index_option="position")
    return sb.build()


class PageIndex:
    """Open (or create) the index directory of a corpus."""

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if create:
            path.mkdir(parents=True, exist_ok=True)
        elif not (path / "meta.json").exists():
            raise UserError(
                f"no search index at {path}; run 'deskbench ingest' to build it "
                "(with the same PDFs: unchanged files are only re-indexed)"
            )
        if (path / "meta.json").exists():
            found = index_analyzer(path)
            if found != ANALYZER_NAME:
                raise UserError(
                    f"the search index at {path} was built by another deskbench version (analyzer {found}, now "
                    f"{ANALYZER_NAME}: Whoosh's stop words and 2-character minimum); run 'deskbench ingest' "
                    "on the corpus again to rebuild it from the page store (unchanged PDFs are not re-read)"
                )
        self.schema = _schema()
        try:
            self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        except ValueError as exc:
            raise UserError(
                f"search index at {path} is unreadable or from another version ({exc}); "
                "delete that folder and run 'deskbench ingest' again to rebuild it"
            ) from exc
        self.index.register_tokenizer(ANALYZER_NAME, build_analyzer())
        self._reload_lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def writer(self, heap_bytes: int = 256_000_000, threads: int = 0) -> Iterator[IndexWriter]:
        try:
            raw = self.index.writer(heap_size=heap_bytes, num_threads=threads)
        except ValueError as exc:
            if "lock" in str(exc).lower():
                raise UserError(
                    f"another process is writing the index at {self.path}; "
                    "wait for that ingest to finish, then run again"
                ) from exc
            raise
        w = IndexWriter(raw)
        try:
            yield w
        except BaseException:
            raw.rollback()
            raise
        else:
            raw.commit()
            raw.wait_merging_threads()
        finally:
            self.reload()

    def reload(self) -> None:
        with self._reload_lock:
            self.index.reload()

    # -- reading -------------------------------------------------------------------------

    def num_pages(self) -> int:
        return self.index.searcher().num_docs

    def search(self, query: str, k: int = 5, *, strict: bool = False) -> SearchResult:
        """BM25 top-k pages for a Whoosh-syntax query, parsed as Whoosh parses it; strict raises
        QuerySyntaxError where Whoosh would repair or drop part of the query."""
        tree = parse_query(query, strict=strict)
        hl = highlights(tree)
        if k < 1:
            return SearchResult([], hl)
        searcher = self.index.searcher()
        tq = to_tantivy(tree, self.schema, FIELDS, expand=lambda wc: _expand(searcher, wc))
        pages = []
        for score, address in _top_hits_with_ties(searcher, tq, k):
            doc = searcher.doc(address)
            pages.append(ScoredPage(doc[DOC][0], int(doc[PAGE][0]), score))
        # Ties are broken by (document, page), not by segment order: the same pages always give
        # the same list, however the index was built.
        pages.sort(key=lambda p: (-p.score, p.document, p.page))
        return SearchResult(pages[:k], hl)


def index_analyzer(path: Path) -> str | None:
    """The text analyzer an index on disk was built with (None if unreadable)."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        for f in meta["schema"]:
            if f.get("name") == TEXT:
                return str(f["options"]["indexing"]["tokenizer"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


def _expand(searcher: tantivy.Searcher, wc: Wildcard) -> list[str] | None:
    """The index terms a wildcard matches, listed from the term dictionary by its literal prefix."""
    prefix = wc.regex.split(".", 1)[0]
    if not prefix:
        return None  # a leading wildcard: let tantivy's automaton walk the dictionary
    candidates = searcher.terms_with_prefix(TEXT, prefix, limit=MAX_WILDCARD_TERMS * 8)
    pattern = re.compile(wc.regex)
    terms = [t for t, _ in candidates if pattern.fullmatch(t)]
    if len(terms) > MAX_WILDCARD_TERMS or len(candidates) >= MAX_WILDCARD_TERMS * 8:
        return None
    return terms


def _top_hits_with_ties(
    searcher: tantivy.Searcher, query: tantivy.Query, k: int
) -> list[tuple[float, tantivy.DocAddress]]:
    """The top k hits plus the hits tied with the k-th (up to a cap), scores rounded so float
    noise counts as a tie."""
    limit = k + 16
    first = searcher.search(query, limit=limit, count=True)
    hits = [(round(float(s), 6), a) for s, a in first.hits]
    if len(hits) == limit and hits[-1][0] == hits[k - 1][0]:
        # the tie runs past the first page (constant-score wildcards): one search for all of it
        limit = min(first.count, MAX_TIE_CANDIDATES)
        hits = [(round(float(s), 6), a) for s, a in searcher.search(query, limit=limit, count=False).hits]
    if len(hits) <= k:
        return hits
    cut = hits[k - 1][0]
    return [h for h in hits if h[0] >= cut]


class IndexWriter:
    """Replace the pages of whole documents; visible to searchers after the commit."""

    def __init__(self, raw: tantivy.IndexWriter) -> None:
        self._raw = raw

    def replace_document(self, doc_id: str, pages: Iterable[tuple[int, str]]) -> None:
        self._raw.delete_documents_by_term(DOC, doc_id)
        pages = list(pages)
        total = len(pages)
        for page, text in pages:
            self._raw.add_document(tantivy.Document(doc_id=doc_id, page=page, total_pages=total,
                                                    text=index_form(text)))

    def delete_document(self, doc_id: str) -> None:
        self._raw.delete_documents_by_term(DOC, doc_id)

    def commit(self) -> None:
        self._raw.commit()
