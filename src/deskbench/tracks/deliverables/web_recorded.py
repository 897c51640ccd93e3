"""The recorded web (`--web recorded:DIR`, `--web-record DIR`): saved pages and searches, offline and reproducible; web_access.py's docstring gives the format."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from deskbench.errors import UserError
from deskbench.tasks.jsonl import WEB_INDEX, capped_lines
from deskbench.tracks.deliverables.web_backend import Page, SearchHit, WebBackend, WebError
from deskbench.tracks.deliverables.web_page_text import page_text


def url_key(url: str) -> str:
    """The form two URLs are compared in: no fragment, scheme and host lower-case, no trailing /."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def query_key(query: str) -> str:
    return " ".join(query.casefold().split())


# ---- the recorded backend --------------------------------------------------------------------

class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordedPage(_Line):
    """A saved page: `file` (relative to the folder) holds the bytes served for `url`."""

    kind: Literal["page"] = "page"
    url: str = Field(min_length=1)
    file: str = Field(min_length=1)
    content_type: str = "text/html"
    status: int = 200


class RecordedSearch(_Line):
    """A saved search: the hits `query` returned, best first."""

    kind: Literal["search"] = "search"
    query: str = Field(min_length=1)
    results: list[SearchHit] = Field(default_factory=list)


RecordedLine = Annotated[RecordedPage | RecordedSearch, Field(discriminator="kind")]
_LINE = TypeAdapter(RecordedLine)
INDEX = "index.jsonl"


MAX_HITS = 1_000  # results of one recorded search (a search shows 10; web_access.MAX_RESULTS)
PAGE_BYTES = 3_000_000  # bytes of a recorded page read, as a live fetch reads at most (web_live.LiveWeb)


def _hits_shape(item: RecordedPage | RecordedSearch) -> str | None:
    if isinstance(item, RecordedSearch) and len(item.results) > MAX_HITS:
        return (f"a search with {len(item.results):,} results, over the cap of {MAX_HITS:,} per search; "
                f"keep its first {MAX_HITS:,}")
    return None


def read_recording(folder: Path) -> tuple[dict[str, RecordedPage], dict[str, RecordedSearch]]:
    """The index of a recorded web folder, validated a line at a time under the index's caps
    (tasks/jsonl.py: a regular file, its size, a line's size, UTF-8); a bad line is a UserError
    naming file:line."""
    index = folder / INDEX
    if not index.is_file():
        raise UserError(f"--web recorded:{folder}: no {INDEX} in that folder; record one with --web-record "
                        "or write it (format: deskbench.tracks.deliverables.web_access)")
    pages: dict[str, RecordedPage] = {}
    searches: dict[str, RecordedSearch] = {}
    root = folder.resolve()
    for n, line in capped_lines(index, WEB_INDEX, can_skip=False):
        where = f"{index} line {n}"
        try:
            item = _LINE.validate_json(line)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in err["loc"]) or "(the line)"
            raise UserError(f"{where}: field '{field}': {err['msg']}; fix the line "
                            "(a page: kind, url, file; a search: kind, query, results)") from None
        problem = _hits_shape(item)
        if problem is not None:
            raise UserError(f"{where}: {problem}")
        if isinstance(item, RecordedPage):
            path = (folder / item.file).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                raise UserError(f"{where}: file {item.file!r} is not a file inside {folder}; fix the path")
            pages[url_key(item.url)] = item
        else:
            searches[query_key(item.query)] = item
    return pages, searches


class RecordedWeb:
    """Saved pages and searches (web_access.py's module docstring gives the format); reproducible, offline."""

    name = "recorded"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pages, self.searches = read_recording(folder)

    async def search(self, query: str, count: int) -> list[SearchHit]:
        found = self.searches.get(query_key(query))
        return found.results[:count] if found else []

    async def fetch(self, url: str) -> Page:
        page = self.pages.get(url_key(url))
        if page is None:
            raise WebError(f"{url} could not be reached (not in the recorded web)")
        path = self.folder / page.file
        try:
            with path.open("rb") as fh:
                raw = fh.read(PAGE_BYTES + 1)
        except OSError as exc:
            raise WebError(f"{url} could not be read from the recorded web ({exc.strerror or exc})") from None
        text = page_text(raw[:PAGE_BYTES], page.content_type)
        if len(raw) > PAGE_BYTES:
            text += f"\n[... the page is larger than {PAGE_BYTES} bytes; the rest was not read]"
        return Page(url=page.url, status=page.status, content_type=page.content_type, text=text)

    async def aclose(self) -> None:
        pass


class RecordingWeb:
    """A live backend whose searches and pages are also written to `folder` in the recorded
    format (pages as the text the agent read), so `--web recorded:FOLDER` replays the run."""

    def __init__(self, inner: WebBackend, folder: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.folder = folder
        (folder / "pages").mkdir(parents=True, exist_ok=True)

    def _append(self, line: RecordedPage | RecordedSearch) -> None:
        with (self.folder / INDEX).open("a", encoding="utf-8") as f:
            f.write(line.model_dump_json() + "\n")

    async def search(self, query: str, count: int) -> list[SearchHit]:
        hits = await self.inner.search(query, count)
        self._append(RecordedSearch(query=query, results=hits))
        return hits

    async def fetch(self, url: str) -> Page:
        page = await self.inner.fetch(url)
        name = f"pages/{hashlib.sha256(url_key(url).encode()).hexdigest()[:24]}.txt"
        (self.folder / name).write_text(page.text, encoding="utf-8")
        self._append(RecordedPage(url=url, file=name, content_type="text/plain; charset=utf-8", status=page.status))
        return page

    async def aclose(self) -> None:
        await self.inner.aclose()
