"""`Corpus`: the Python API agents, tools and the web app use to read an ingested corpus.

    corpus/
      pages.sqlite      page store (source of truth)
      index/            search index derived from it (search/postings.py)
      docs/<sha256>.pdf copies of the ingested PDFs, so the corpus stands alone
      cache/pages/      rendered page images
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.corpus.creation import build_atomically, is_half_made
from deskbench.corpus.images import ImageSpec, PageImageCache, render_page
from deskbench.corpus.store import DocumentRecord, PageRecord, PageStore
from deskbench.errors import UserError
from deskbench.search.index import PageIndex
from deskbench.search.query import highlights, parse_query
from deskbench.search.retriever import Retriever, RetrieverSpec, open_retriever, parse_spec
from deskbench.search.snippet import make_snippet
from deskbench.untrusted.limits import FileLimitError


def _new_corpus(root: Path) -> None:
    """A new corpus's files: the page store's schema, an empty index, the docs folder."""
    (root / "docs").mkdir()
    PageStore(root / PageStore.FILENAME, create=True).close()
    PageIndex(root / "index", create=True)


class SearchHit(BaseModel):
    """One search result, as `deskbench search --json` prints it and agents receive it."""

    document: str
    page: int
    score: float
    snippet: str


class Corpus:
    """An ingested corpus directory. Safe to share across threads."""

    def __init__(self, root: Path, store: PageStore, index: PageIndex) -> None:
        self.root = root
        self.store = store
        self.index = index
        self.images = PageImageCache(root / "cache" / "pages")
        self._render_lock = threading.Lock()
        self.retriever: Retriever | None = None  # None: the page index (BM25), as MADQA's tool ranks

    @classmethod
    def open(cls, root: Path | str) -> Corpus:
        root = Path(root)
        db = root / PageStore.FILENAME
        if not db.exists():
            from deskbench.paths import corpus_error

            raise corpus_error(root) or UserError(  # a typo is not to be ingested into: the corpora nearby
                f"{root} is not a deskbench corpus (no {PageStore.FILENAME}); "
                f"create it with: deskbench ingest PDFS... --corpus {root}"
            )
        return cls(root, PageStore(db), PageIndex(root / "index"))

    @classmethod
    def create(cls, root: Path | str) -> Corpus:
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise UserError(f"corpus path {root} is a file; give a directory for --corpus")
        if root.is_dir() and any(root.iterdir()) and not (root / PageStore.FILENAME).exists():
            from deskbench.nearby import is_run

            if is_run(root):
                raise UserError(f"{root} is a run directory, not a corpus; give a new or empty directory for "
                                "--corpus")
            raise UserError(
                f"{root} exists, is not empty and is not a deskbench corpus; "
                "choose a new or empty directory for --corpus"
            )
        if (root / PageStore.FILENAME).exists() and not is_half_made(root):
            (root / "docs").mkdir(exist_ok=True)
            return cls(root, PageStore(root / PageStore.FILENAME, create=True), PageIndex(root / "index", create=True))
        build_atomically(root, _new_corpus)  # a kill -9 leaves no half-made corpus at `root`
        return cls(root, PageStore(root / PageStore.FILENAME), PageIndex(root / "index"))

    # -- search --------------------------------------------------------------------------

    def use_retriever(self, spec: RetrieverSpec | str, *, allow_download: bool = False) -> Retriever:
        """Search with `spec` (search/retriever.py) from now on, building its index over this corpus
        first when it has none yet (stored in the corpus folder); `bm25` is the page index itself."""
        spec = parse_spec(spec) if isinstance(spec, str) else spec
        self.retriever = open_retriever(spec, self, allow_download=allow_download)
        return self.retriever

    def search(self, query: str, k: int = 5, *, snippets: bool = True, strict: bool = False) -> list[SearchHit]:
        """Top-k pages for a query: by BM25 for a Whoosh-syntax query, parsed as MADQA's Whoosh tool
        parses it (a malformed query is repaired, never refused; strict=True raises QuerySyntaxError
        instead), or by the retriever `use_retriever` chose. Agents that read whole pages pass
        snippets=False (the snippet is then ""); a snippet marks the query's terms whatever ranked."""
        if self.retriever is None:
            result = self.index.search(query, k, strict=strict)
            pages, marks = result.pages, result.highlights
        else:
            marks = highlights(parse_query(query, strict=strict))
            pages = self.retriever.search(query, k) if k >= 1 else []
        if not snippets:
            return [SearchHit(document=p.document, page=p.page, score=p.score, snippet="") for p in pages]
        texts = self.store.texts([(p.document, p.page) for p in pages])
        return [
            SearchHit(
                document=p.document,
                page=p.page,
                score=p.score,
                snippet=make_snippet(texts.get((p.document, p.page), ""), marks),
            )
            for p in pages
        ]

    def page_keys(self) -> list[tuple[str, int, str]]:
        """Every page as (document, page, the document's content hash), documents in id order: what
        an embedding retriever indexes, and how it knows a page's vector is stale."""
        return [(d.doc_id, n, d.content_hash) for d in sorted(self.documents(), key=lambda d: d.doc_id)
                for n in range(1, d.page_count + 1)]

    # -- documents and pages -------------------------------------------------------------

    def documents(self) -> list[DocumentRecord]:
        return self.store.documents()

    def document(self, doc_id: str) -> DocumentRecord:
        doc = self.store.document(doc_id)
        if doc is None:
            raise UserError(
                f"document {doc_id!r} is not in the corpus at {self.root}; "
                f"'deskbench info --corpus {self.root}' lists the documents"
            )
        return doc

    def _check_page(self, doc: DocumentRecord, page: int) -> None:
        if not 1 <= page <= doc.page_count:
            raise UserError(
                f"page {page} is out of range for {doc.doc_id}: it has pages 1 to {doc.page_count}"
            )

    def page_text(self, doc_id: str, page: int) -> PageRecord:
        doc = self.document(doc_id)
        self._check_page(doc, page)
        record = self.store.page(doc_id, page)
        assert record is not None, f"store lost page {page} of {doc_id}"
        return record

    def page_texts(self, pages: Sequence[tuple[str, int]]) -> list[str]:
        """The texts of several pages in one query, in order; a page that is not in the corpus
        raises page_text's clear error."""
        found = self.store.texts(pages)
        return [found[key] if key in found else self.page_text(*key).text for key in pages]

    def pdf_path(self, doc_id: str) -> Path:
        return self.stored_file(self.document(doc_id))

    def stored_file(self, doc: DocumentRecord) -> Path:
        """Where the document's stored copy is, symlinks resolved, and only when that is inside
        the corpus folder: the one home of "a page is read only from inside its corpus", which
        every reader (agents, MCP, export, the web apps, `deskbench page`) goes through. A row of
        pages.sqlite is data: a forged one pointing at /etc or a symlink out is refused, not read."""
        root = self.root.resolve()
        try:
            path = (root / doc.stored_path).resolve()
        except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the stored path
            path = None
        if path is None or not path.is_relative_to(root):
            raise UserError(
                f"document {doc.doc_id!r} in the corpus at {self.root} points outside the corpus folder "
                f"(stored path {doc.stored_path!r}); it is not read: ingest {doc.source_path} again into a "
                "new corpus (deskbench ingest PDFS... --corpus NEWDIR)"
            )
        return path

    def page_image(self, doc_id: str, page: int, spec: ImageSpec | None = None) -> bytes:
        """Encoded image bytes of one page, from the cache when it was rendered before."""
        spec = spec or ImageSpec()
        spec.validate()
        doc = self.document(doc_id)
        self._check_page(doc, page)
        pdf = self.stored_file(doc)  # before the cache: a document outside the corpus is not shown at all
        cached = self.images.get(doc.content_hash, page, spec)
        if cached is not None:
            return cached
        if not pdf.exists():
            raise UserError(
                f"the stored copy of {doc_id} ({pdf}) is missing; ingest {doc.source_path} again"
            )
        # pdfium is not thread-safe: one render at a time per process.
        with self._render_lock:
            try:
                data = render_page(pdf, page, spec)
            except FileLimitError as exc:
                raise FileLimitError(exc.verdict.about(
                    f"page {page} of {doc_id}", "render it at a lower dpi or with a pixel cap (--dpi, --max-pixels)")) from None
        self.images.put(doc.content_hash, page, spec, data)
        return data

    def close(self) -> None:
        self.store.close()
