"""SQLite page store: the source of truth of a corpus.

One row per document and per page. A document's pages are replaced in one transaction, so a
crash leaves either the old or the new version, never a mix. The search index is derived from
this store: `documents.indexed_hash` records which version the index holds, so an interrupted
ingest is completed by the next one.

Page text supplied from outside (`deskbench ingest --page-text`, e.g. the official MADQA OCR) is
kept in its own table, `page_text`, beside deskbench's own text in `pages`: every read gives the
supplied text where there is one, with its source (`page-text:<sha256 of the file>`), and the
extracted text stays in `pages` for audit. A changed PDF replaces its pages and so drops the text
supplied for its old version (the foreign key cascades). Corpora made before the table existed
get it when text is first supplied; a store opened before then reads it when opened again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from deskbench.corpus.creation import check_store, not_a_store
from deskbench.sqlite import ThreadLocalDB

TextSource = str
"""Where a page's text comes from: "text_layer", "ocr" (pages.text_source), or "page-text:<sha256>"
(a file given to `deskbench ingest --page-text`)."""
PAGE_TEXT_PREFIX = "page-text:"


SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,            -- the file name, as MADQA cites it
    source_path TEXT NOT NULL,          -- where it was ingested from
    stored_path TEXT NOT NULL,          -- copy inside the corpus, relative to the corpus dir
    content_hash TEXT NOT NULL,         -- sha256 of the file bytes
    size_bytes INTEGER NOT NULL,
    page_count INTEGER NOT NULL,
    pages_ocr INTEGER NOT NULL,
    pages_failed INTEGER NOT NULL,
    ingested_at TEXT NOT NULL,
    indexed_hash TEXT                   -- content_hash of the version in the search index
);
CREATE TABLE IF NOT EXISTS pages (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    page INTEGER NOT NULL,              -- 1-based
    text TEXT NOT NULL,
    text_source TEXT NOT NULL CHECK (text_source IN ('text_layer', 'ocr')),
    error TEXT,                         -- why the page has no (or partial) text
    PRIMARY KEY (doc_id, page)
);
CREATE TABLE IF NOT EXISTS ingest_errors (
    source_path TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    content_hash TEXT,
    reason TEXT NOT NULL,
    at TEXT NOT NULL
);
"""

_PAGE_TEXT_SCHEMA = """
CREATE TABLE IF NOT EXISTS page_text (
    doc_id TEXT NOT NULL,
    page INTEGER NOT NULL,
    text TEXT NOT NULL,                 -- served in place of pages.text
    source TEXT NOT NULL,               -- 'page-text:<sha256 of the supplied file>'
    PRIMARY KEY (doc_id, page),
    FOREIGN KEY (doc_id, page) REFERENCES pages(doc_id, page) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS page_text_files (
    sha256 TEXT PRIMARY KEY,
    path TEXT NOT NULL,                 -- where it was read from (the last time)
    pages INTEGER NOT NULL,             -- pages it supplied
    applied_at TEXT NOT NULL
);
"""

# Page reads: the supplied text where there is one, else the extracted text.
_PAGE_COLUMNS_PLAIN = "p.doc_id, p.page, p.text, p.text_source, p.error FROM pages p"
_PAGE_COLUMNS_SUPPLIED = (
    "p.doc_id, p.page, COALESCE(o.text, p.text), COALESCE(o.source, p.text_source), p.error FROM pages p"
    " LEFT JOIN page_text o ON o.doc_id = p.doc_id AND o.page = p.page"
)


@dataclass(frozen=True)
class PageRecord:
    """One page as stored: what search indexes and what agents read."""

    doc_id: str
    page: int
    text: str
    text_source: TextSource
    error: str | None = None


@dataclass(frozen=True)
class DocumentRecord:
    """One ingested document."""

    doc_id: str
    source_path: str
    stored_path: str
    content_hash: str
    size_bytes: int
    page_count: int
    pages_ocr: int
    pages_failed: int
    ingested_at: str
    indexed_hash: str | None


@dataclass(frozen=True)
class PageTextFile:
    """A file of page text applied to the corpus (`deskbench ingest --page-text`)."""

    sha256: str
    path: str
    pages: int
    applied_at: str


@dataclass(frozen=True)
class PageTextApplied:
    """What applying supplied page text changed."""

    changed: int  # pages whose text changed
    unchanged: int  # pages that already had this text from this file
    documents: list[str]  # documents whose text changed (to re-index)


@dataclass(frozen=True)
class IngestError:
    """A file that could not be ingested, with a one-line reason."""

    source_path: str
    doc_id: str
    content_hash: str | None
    reason: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class PageStore:
    """Thread-safe access to the corpus SQLite file (one connection per thread, WAL mode)."""

    FILENAME = "pages.sqlite"

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        self._db = ThreadLocalDB(path, foreign_keys=True)
        try:
            con = self._db.conn()
        except sqlite3.DatabaseError as exc:  # not a database: PRAGMA journal_mode fails on connect
            raise not_a_store(path, exc) from None
        if not create:
            check_store(path, con)  # not a database, truncated, no tables: one line
        if create:
            self._db.conn().executescript(_SCHEMA + _PAGE_TEXT_SCHEMA)  # executescript manages its own transaction
            self._db.conn().execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        self._supplied = self._conn().execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'page_text'"
        ).fetchone() is not None

    def _page_columns(self) -> str:
        return _PAGE_COLUMNS_SUPPLIED if self._supplied else _PAGE_COLUMNS_PLAIN

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def close(self) -> None:
        self._db.close()

    # -- reads ---------------------------------------------------------------------------

    def document(self, doc_id: str) -> DocumentRecord | None:
        row = self._conn().execute(
            "SELECT doc_id, source_path, stored_path, content_hash, size_bytes, page_count,"
            " pages_ocr, pages_failed, ingested_at, indexed_hash FROM documents WHERE doc_id = ?",
            (doc_id,),
        ).fetchone()
        return DocumentRecord(*row) if row else None

    def documents(self) -> list[DocumentRecord]:
        rows = self._conn().execute(
            "SELECT doc_id, source_path, stored_path, content_hash, size_bytes, page_count,"
            " pages_ocr, pages_failed, ingested_at, indexed_hash FROM documents ORDER BY doc_id"
        ).fetchall()
        return [DocumentRecord(*r) for r in rows]

    def page(self, doc_id: str, page: int) -> PageRecord | None:
        row = self._conn().execute(
            f"SELECT {self._page_columns()} WHERE p.doc_id = ? AND p.page = ?",
            (doc_id, page),
        ).fetchone()
        return PageRecord(*row) if row else None

    def pages(self, doc_id: str) -> list[PageRecord]:
        rows = self._conn().execute(
            f"SELECT {self._page_columns()} WHERE p.doc_id = ? ORDER BY p.page",
            (doc_id,),
        ).fetchall()
        return [PageRecord(*r) for r in rows]

    def texts(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], str]:
        """Page texts for many (doc_id, page) keys in one query (search results need a few)."""
        if not keys:
            return {}
        where = " OR ".join(["(p.doc_id = ? AND p.page = ?)"] * len(keys))
        params = [v for key in keys for v in key]
        rows = self._conn().execute(f"SELECT {self._page_columns()} WHERE {where}", params)
        return {(d, p): t for d, p, t, _source, _error in rows}

    def iter_pages(self, doc_ids: Sequence[str]) -> Iterator[PageRecord]:
        for doc_id in doc_ids:
            yield from self.pages(doc_id)

    def errors(self) -> list[IngestError]:
        rows = self._conn().execute(
            "SELECT source_path, doc_id, content_hash, reason FROM ingest_errors ORDER BY source_path"
        ).fetchall()
        return [IngestError(*r) for r in rows]

    def error_for(self, source_path: str) -> IngestError | None:
        row = self._conn().execute(
            "SELECT source_path, doc_id, content_hash, reason FROM ingest_errors WHERE source_path = ?",
            (source_path,),
        ).fetchone()
        return IngestError(*row) if row else None

    def unindexed(self) -> list[DocumentRecord]:
        """Documents whose current version is not (yet) in the search index."""
        return [d for d in self.documents() if d.indexed_hash != d.content_hash]

    def stats(self) -> dict[str, int]:
        con = self._conn()
        docs, pages = con.execute(
            "SELECT COUNT(*), COALESCE(SUM(page_count), 0) FROM documents"
        ).fetchone()
        ocr = con.execute("SELECT COUNT(*) FROM pages WHERE text_source = 'ocr'").fetchone()[0]
        failed = con.execute("SELECT COUNT(*) FROM ingest_errors").fetchone()[0]
        return {"documents": docs, "pages": pages, "pages_ocr": ocr, "files_failed": failed,
                "pages_page_text": sum(self.supplied_counts().values())}

    def supplied_counts(self) -> dict[str, int]:
        """Pages whose text was supplied (`--page-text`), per document."""
        if not self._supplied:
            return {}
        rows = self._conn().execute("SELECT doc_id, COUNT(*) FROM page_text GROUP BY doc_id")
        return {d: n for d, n in rows}

    def page_text_files(self) -> list[PageTextFile]:
        """The files of page text applied, with the pages of the corpus that still come from each."""
        if not self._supplied:
            return []
        rows = self._conn().execute(
            "SELECT f.sha256, f.path, (SELECT COUNT(*) FROM page_text o WHERE o.source = ? || f.sha256),"
            " f.applied_at FROM page_text_files f ORDER BY f.applied_at, f.sha256",
            (PAGE_TEXT_PREFIX,),
        ).fetchall()
        return [PageTextFile(*r) for r in rows]

    # -- writes --------------------------------------------------------------------------

    def replace_document(self, doc: DocumentRecord, pages: Sequence[PageRecord]) -> None:
        """Write a document and all its pages atomically, replacing any earlier version."""
        with self._db.write() as con:
            con.execute("DELETE FROM pages WHERE doc_id = ?", (doc.doc_id,))
            con.execute("DELETE FROM documents WHERE doc_id = ?", (doc.doc_id,))
            con.execute("DELETE FROM ingest_errors WHERE source_path = ?", (doc.source_path,))
            con.execute(
                "INSERT INTO documents(doc_id, source_path, stored_path, content_hash, size_bytes,"
                " page_count, pages_ocr, pages_failed, ingested_at, indexed_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                (
                    doc.doc_id,
                    doc.source_path,
                    doc.stored_path,
                    doc.content_hash,
                    doc.size_bytes,
                    doc.page_count,
                    doc.pages_ocr,
                    doc.pages_failed,
                    doc.ingested_at or _now(),
                ),
            )
            con.executemany(
                "INSERT INTO pages(doc_id, page, text, text_source, error) VALUES (?, ?, ?, ?, ?)",
                [(p.doc_id, p.page, p.text, p.text_source, p.error) for p in pages],
            )

    def record_error(self, err: IngestError) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO ingest_errors(source_path, doc_id, content_hash, reason, at)"
            " VALUES (?, ?, ?, ?, ?)",
            (err.source_path, err.doc_id, err.content_hash, err.reason, _now()),
        )

    def mark_indexed(self, items: Sequence[tuple[str, str]]) -> None:
        """Record that the index now holds these (doc_id, content_hash) versions."""
        with self._db.write() as con:
            con.executemany(
                "UPDATE documents SET indexed_hash = ? WHERE doc_id = ? AND content_hash = ?",
                [(h, d, h) for d, h in items],
            )

    def apply_page_text(
        self, texts: Sequence[tuple[str, int, str]], *, sha256: str, path: str
    ) -> PageTextApplied:
        """Serve `texts` ((doc_id, page, text), pages that exist) in place of the extracted text,
        in one transaction; the documents whose text changed leave the search index's record
        (indexed_hash) in the same transaction, so a kill before they are re-indexed is completed
        by the next ingest."""
        source = PAGE_TEXT_PREFIX + sha256
        con = self._conn()
        if not self._supplied:
            con.executescript(_PAGE_TEXT_SCHEMA)
            self._supplied = True
        with self._db.write() as con:
            current = {(d, p): (t, s) for d, p, t, s in con.execute("SELECT doc_id, page, text, source FROM page_text")}
            changed_docs: set[str] = set()
            changed = unchanged = 0
            rows = []
            for doc_id, page, text in texts:
                old = current.get((doc_id, page))
                if old == (text, source):
                    unchanged += 1
                    continue
                if old is None or old[0] != text:
                    changed_docs.add(doc_id)
                changed += 1
                rows.append((doc_id, page, text, source))
            con.executemany("INSERT OR REPLACE INTO page_text(doc_id, page, text, source) VALUES (?, ?, ?, ?)", rows)
            con.executemany("UPDATE documents SET indexed_hash = NULL WHERE doc_id = ?",
                            [(d,) for d in sorted(changed_docs)])
            con.execute(
                "INSERT OR REPLACE INTO page_text_files(sha256, path, pages, applied_at) VALUES (?, ?, ?, ?)",
                (sha256, path, len(texts), _now()),
            )
        return PageTextApplied(changed=changed, unchanged=unchanged, documents=sorted(changed_docs))

    def forget_index(self) -> None:
        """The index was lost: every document must be indexed again."""
        self._conn().execute("UPDATE documents SET indexed_hash = NULL")

    @staticmethod
    def now() -> str:
        return _now()
