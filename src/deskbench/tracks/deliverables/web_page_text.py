"""Page bytes turned into the text the agent reads (HTML, plain text, JSON/XML/CSV, PDF), the same for every backend."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser

from deskbench.agents.base import describe_problem
from deskbench.tracks.deliverables.web_backend import WebError

_SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe"}
_BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "section",
          "article", "header", "footer", "ul", "ol", "pre", "blockquote", "dd", "dt", "hr", "main",
          "nav", "aside", "figure", "figcaption", "form", "caption"}


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.skip = 0
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag in _SKIP:
            self.skip += 1
        elif tag in _BLOCK:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append("\t")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Readable text of an HTML page (title first; scripts, styles and <head> dropped; one line
    per block, table cells tab-separated). The standard library's parser: no dependency."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r" ?\t[ \t]*", "\t", re.sub(r"[ \r\f\v\xa0]+", " ", line)).strip()
             for line in "".join(parser.parts).split("\n")]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(parser.title).split())
    return f"{title}\n\n{body}" if title else body


def _decode(raw: bytes, content_type: str) -> str:
    m = re.search(r"charset=([\w.-]+)", content_type, re.IGNORECASE)
    try:
        return raw.decode(m.group(1) if m else "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def _pdf_text(raw: bytes, content_type: str) -> str:
    """A fetched PDF's text, parsed in a worker under the untrusted-file limits (a page from the
    web is as hostile as any file); over a limit the agent is told why."""
    from deskbench.untrusted import FileLimitError, ReaderCrashed, call_limited

    try:
        return call_limited(_pdf_pages_text, raw, subject="the PDF")
    except (FileLimitError, ReaderCrashed) as exc:
        raise WebError(str(exc)) from None


def _pdf_pages_text(raw: bytes) -> str:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(raw)
    try:
        return "\n\n".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()


PAGE_READERS: dict[str, Callable[[bytes, str], str]] = {
    "text/html": lambda raw, ct: html_to_text(_decode(raw, ct)),
    "application/xhtml+xml": lambda raw, ct: html_to_text(_decode(raw, ct)),
    "text/plain": _decode,
    "text/csv": _decode,
    "text/markdown": _decode,
    "application/json": _decode,
    "application/xml": _decode,
    "text/xml": _decode,
    "application/pdf": _pdf_text,
}
"""Media type -> text. A type not here is refused (the agent is told what it was)."""


def page_text(raw: bytes, content_type: str) -> str:
    kind = content_type.split(";")[0].strip().lower() or "text/html"
    reader = PAGE_READERS.get(kind)
    if reader is None:
        raise WebError(f"the page is {kind}, which cannot be read as text")
    try:
        return reader(raw, content_type)
    except WebError:
        raise
    except Exception as exc:  # a broken PDF, say: the agent reads that it failed
        raise WebError(f"the page ({kind}) could not be read: {describe_problem(exc)}") from None
