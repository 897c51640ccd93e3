"""`deskbench ingest --page-text FILE.jsonl`: page text from elsewhere in place of deskbench's own.

MADQA's official baselines do not read the PDFs' text layers: the BM25 agent's Whoosh index is
built on Amazon Textract OCR, the RLM's context on Mistral OCR markdown. Supplying that text makes
deskbench's search index and text views (bm25-agent/rag/oracle with --view text, rlm, lexical) read
what the official agents read. Pages the file does not name keep deskbench's own text.

Accepted lines (JSON Lines, one object a line; shapes can be mixed):

- `{"document": "a.pdf", "page": 3, "text": "..."}`: deskbench's shape, one page a line;
- `{"file": "a.pdf", "page_number": 3, "text": "...", "service": ..., "total_pages": ...}`: the
  official Textract script's output (baselines/utils/ocr-documents/textract.py), one page a line;
- `{"pdf_name": "a.pdf", "markdown": "...", "metadata": ...}`: a row of the official RLM's Mistral
  OCR corpus (OxRML/pdfs-to-markdown-mistral-ocr), one document a line; its pages are the
  markdown split on "\\n---\\n", each stripped, as baselines/recursive-lm/rlm_agent.py splits them;
- `{"document": "a.pdf", "pages": ["page 1 text", "page 2 text", ...]}`: one document a line
  (items may also be `{"page": N, "text": ...}`).

The document is named by `document`, `file` or `pdf_name` (the file name, as the corpus knows it);
pages are 1-based. The file is checked whole before anything is written: a bad line, a document
the corpus does not hold, a page out of range or a page given twice stops with one line naming
file:line and the fix (exit code 2), and the corpus is left as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.corpus.corpus import Corpus
from deskbench.errors import UserError, read_user_file

DOC_KEYS = ("document", "file", "pdf_name")
PAGE_KEYS = ("page", "page_number")
TEXT_KEYS = ("text", "markdown")
MISTRAL_PAGE_BREAK = "\n---\n"  # the official RLM's page separator in Mistral OCR markdown
SHAPES = ('{"document": ..., "page": N, "text": ...} a line (or Textract\'s file/page_number/text, '
          'or one document a line with "markdown" or a "pages" list)')


@dataclass(frozen=True)
class SuppliedPage:
    document: str
    page: int
    text: str
    line: int  # where it was read from
    split: int | None = None  # a document's markdown split into this many pages


@dataclass
class PageTextFile:
    path: Path
    sha256: str
    pages: list[SuppliedPage] = field(default_factory=list)


class PageTextSummary(BaseModel):
    """What `deskbench ingest --page-text` did (the `page_text` object of `ingest --json`)."""

    file: str
    sha256: str
    pages: int  # pages the file supplies
    changed: int  # of which newly supplied, with other text or from another file
    unchanged: int  # already supplied by this file with this text
    documents_reindexed: int
    corpus_pages_supplied: int  # pages of the corpus whose text now comes from a supplied file
    corpus_pages_own: int  # pages of the corpus that keep deskbench's own text


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for k in keys:
        if k in row:
            return k, row[k]
    return None, None


def _page_number(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{where}: {key!r} is {json.dumps(value)[:40]}, not a page number; "
                        "pages are whole numbers from 1 (the first page is 1)")
    return value


def _text(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"{where}: {key!r} is {type(value).__name__}, not text; give the page's text as a "
                        "JSON string (\"\" for an empty page)")
    return value


def _parse_row(row: dict[str, Any], line: int, path: Path) -> list[SuppliedPage]:
    where = _where(path, line)
    doc_key, doc = _first(row, DOC_KEYS)
    if doc_key is None:
        raise UserError(f"{where}: no document name; give \"document\" (or \"file\", \"pdf_name\"): each line is {SHAPES}")
    if not isinstance(doc, str) or not doc:
        raise UserError(f"{where}: {doc_key!r} must be the document's file name as a string, as the corpus "
                        "knows it (deskbench info --corpus DIR lists them)")
    page_key, page = _first(row, PAGE_KEYS)
    if page_key is not None:
        text_key, text = _first(row, TEXT_KEYS)
        if text_key is None:
            raise UserError(f"{where}: page {page} of {doc} has no \"text\"; give the page's text "
                            "(\"\" for an empty page)")
        return [SuppliedPage(doc, _page_number(page, page_key, where), _text(text, text_key, where), line)]
    if "pages" in row:
        items = row["pages"]
        if not isinstance(items, list):
            raise UserError(f"{where}: \"pages\" must be a list of page texts (page 1 first)")
        out = []
        for i, item in enumerate(items, 1):
            if isinstance(item, dict):
                k, n = _first(item, PAGE_KEYS)
                tk, t = _first(item, TEXT_KEYS)
                if tk is None:
                    raise UserError(f"{where}: pages[{i - 1}] has no \"text\"; give each page's text")
                out.append(SuppliedPage(doc, i if k is None else _page_number(n, k, where), _text(t, tk, where), line))
            else:
                out.append(SuppliedPage(doc, i, _text(item, f"pages[{i - 1}]", where), line))
        return out
    if "markdown" in row:
        markdown = _text(row["markdown"], "markdown", where)
        parts = markdown.split(MISTRAL_PAGE_BREAK)
        return [SuppliedPage(doc, i, part.strip(), line, split=len(parts)) for i, part in enumerate(parts, 1)]
    raise UserError(f"{where}: no page number for {doc}; each line is {SHAPES}")


def read_page_text(path: Path) -> PageTextFile:
    """Every page a file supplies, with its sha256; the file's own errors (not the corpus's)."""
    data = read_user_file(path, "the --page-text file")
    result = PageTextFile(path=path, sha256=hashlib.sha256(data).hexdigest())
    seen: dict[tuple[str, int], int] = {}
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{_where(path, number)}: not a JSON object ({exc}); each line is {SHAPES}") from exc
        if not isinstance(row, dict):
            raise UserError(f"{_where(path, number)}: expected a JSON object on this line; each line is {SHAPES}")
        for page in _parse_row(row, number, path):
            key = (page.document, page.page)
            if key in seen:
                raise UserError(f"{_where(path, number)}: page {page.page} of {page.document} is also given on line "
                                f"{seen[key]}; keep one text a page")
            seen[key] = number
            result.pages.append(page)
    if not result.pages:
        raise UserError(f"--page-text {path} holds no pages; each line is {SHAPES}")
    return result


def check_against(corpus: Corpus, supplied: PageTextFile) -> None:
    """Every page the file names must be a page of the corpus."""
    counts = {d.doc_id: d.page_count for d in corpus.documents()}
    for p in supplied.pages:
        where = _where(supplied.path, p.line)
        if p.document not in counts:
            raise UserError(f"{where}: document {p.document!r} is not in the corpus at {corpus.root}; ingest its PDF "
                            f"first (deskbench ingest {p.document} --corpus {corpus.root} --page-text ...) or "
                            "remove the line")
        n = counts[p.document]
        if p.page > n:
            if p.split is not None:
                raise UserError(f"{where}: the markdown of {p.document} splits into {p.split} pages on '---' lines "
                                f"but the PDF has {n}; give that document one line a page "
                                "({\"document\", \"page\", \"text\"}) or remove the line")
            raise UserError(f"{where}: page {p.page} is out of range for {p.document}: it has pages 1 to {n}; "
                            "fix the page number or remove the line")


def apply_page_text(corpus: Corpus, supplied: PageTextFile) -> PageTextSummary:
    """Check the file against the corpus, store its text, re-index the documents whose text
    changed. Idempotent: the same file again changes nothing."""
    check_against(corpus, supplied)
    applied = corpus.store.apply_page_text(
        [(p.document, p.page, p.text) for p in supplied.pages],
        sha256=supplied.sha256, path=str(supplied.path.resolve()),
    )
    if applied.documents:
        reindex(corpus, applied.documents)
    total = sum(d.page_count for d in corpus.documents())
    supplied_now = sum(corpus.store.supplied_counts().values())
    return PageTextSummary(
        file=str(supplied.path), sha256=supplied.sha256, pages=len(supplied.pages), changed=applied.changed,
        unchanged=applied.unchanged, documents_reindexed=len(applied.documents),
        corpus_pages_supplied=supplied_now, corpus_pages_own=total - supplied_now,
    )


def reindex(corpus: Corpus, doc_ids: list[str]) -> None:
    """Put these documents' current text (supplied where there is some) in the search index."""
    done = []
    with corpus.index.writer() as writer:
        for doc_id in doc_ids:
            doc = corpus.store.document(doc_id)
            if doc is None:
                continue
            writer.replace_document(doc_id, ((p.page, p.text) for p in corpus.store.pages(doc_id)))
            done.append((doc_id, doc.content_hash))
    corpus.store.mark_indexed(done)
