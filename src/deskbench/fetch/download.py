"""Many files over HTTP into one folder: resumable, checksummed, bounded, retried.

A file is streamed into `NAME.part` (flushed chunk by chunk, so a killed process leaves what it
had) with its validators beside it in `NAME.part.json`; a later run continues it with a `Range`
request (`If-Range` on its ETag or Last-Modified), or starts again when the server answers the
whole file. A finished file is checked (for MADQA: a PDF header and an end-of-file marker), its
size and sha256 written to `manifest.json`, and only then renamed into place: every file the
folder shows under its own name is in the manifest, and every later run verifies it against
the manifest (a corrupt or truncated file is downloaded again).

Retries with exponential back-off (longer when the server's Retry-After asks so) on what may
pass (5xx, 408, 429, timeouts, dropped connections, a body shorter than announced); never on what will not (404 and the other 4xx, a
body that is not the expected kind of file). A file that still fails is reported with its
reason, and the others are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, ValidationError

if TYPE_CHECKING:
    import httpx

MANIFEST = "manifest.json"
PART = ".part"
RETRY_STATUS = frozenset({408, 425, 429})  # besides every 5xx
MAX_WAIT = 60.0

Outcome = Literal["downloaded", "resumed", "verified", "redownloaded", "adopted", "failed"]
Checker = Callable[[Path], "Problem | None"]


@dataclass(frozen=True)
class Problem:
    """Why a finished body is not the file expected; `retry`: a fresh download may fix it."""

    reason: str
    retry: bool = False


def pdf_problem(path: Path) -> Problem | None:
    """A PDF starts with `%PDF-` (within its first KB, as readers allow) and ends with `%%EOF`
    (within its last KB): an HTML error page served with 200, or a body cut short, is neither."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(1024)
        fh.seek(max(0, size - 1024))
        tail = fh.read()
    if b"%PDF-" not in head:
        start = head[:24].decode("latin-1").replace("\n", " ").replace("\r", " ")
        return Problem(f"not a PDF: it starts with {start!r}")
    if b"%%EOF" not in tail:
        return Problem(f"an incomplete PDF: {size} bytes without its %%EOF marker", retry=True)
    return None


class ManifestEntry(BaseModel):
    """A finished file: where it came from and what it is."""

    url: str
    size: int = Field(ge=0)
    sha256: str


class Manifest(BaseModel):
    """`manifest.json` of a download folder: file name -> entry."""

    files: dict[str, ManifestEntry] = Field(default_factory=dict)


class PartInfo(BaseModel):
    """`NAME.part.json`: what a `.part` file is a prefix of, so it is continued only on the same file."""

    url: str
    etag: str | None = None
    last_modified: str | None = None
    total: int | None = None


@dataclass(frozen=True)
class Item:
    name: str  # the file name in the folder
    url: str


@dataclass(frozen=True)
class Failure:
    name: str
    url: str
    reason: str


@dataclass
class Result:
    """What a `download` did, file by file."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(o == outcome for o in self.outcomes.values())

    @property
    def ok(self) -> list[str]:
        return [n for n, o in self.outcomes.items() if o != "failed"]


@dataclass(frozen=True)
class Settings:
    workers: int = 4  # files in flight at once
    attempts: int = 5  # per file, the first one included
    backoff: float = 1.0  # seconds before the first retry; doubled before each next one (at most MAX_WAIT)
    timeout: float = 60.0  # seconds to connect, and between two reads of a body
    check: Checker = pdf_problem
    sleep: Callable[[float], None] = time.sleep  # the back-off's wait (tests record it instead)
    user_agent: str = "deskbench-fetch"


class _Retry(Exception):
    """This attempt failed in a way that a later one may not; `wait`: the server's Retry-After."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.wait = wait


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (its HTTP-date form is not used for files: None)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class _Fail(Exception):
    """This file cannot be had from this URL."""


def sha256_of(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def safe_name(name: str) -> bool:
    """A plain file name: nothing that would write outside the folder or hide in it."""
    return bool(name) and name == os.path.basename(name) and "\\" not in name and not name.startswith(".") \
        and not name.endswith(PART) and name != MANIFEST and "\0" not in name


class Folder:
    """A download folder and its manifest, shared by the threads that fill it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.manifest = self._read()

    def _read(self) -> Manifest:
        path = self.root / MANIFEST
        if not path.exists():
            return Manifest()
        try:
            return Manifest.model_validate_json(path.read_bytes())
        except (ValidationError, ValueError, OSError):
            return Manifest()  # unreadable: every file is verified again by its PDF check and re-recorded

    def entry(self, name: str) -> ManifestEntry | None:
        with self._lock:
            return self.manifest.files.get(name)

    def record(self, name: str, entry: ManifestEntry | None) -> None:
        with self._lock:
            if entry is None:
                self.manifest.files.pop(name, None)
            else:
                self.manifest.files[name] = entry
            text = json.dumps(self.manifest.model_dump(mode="json"), indent=1, sort_keys=True)
            tmp = self.root / f".{MANIFEST}.tmp"
            tmp.write_text(text + "\n", encoding="utf-8")
            os.replace(tmp, self.root / MANIFEST)


def download(items: Sequence[Item], folder: Path, settings: Settings | None = None,
             on_file: Callable[[str, Outcome], None] | None = None,
             on_bytes: Callable[[int], None] | None = None,
             client: httpx.Client | None = None) -> Result:
    """Bring every item into `folder` (what is there and verifies is kept), `settings.workers`
    at a time; `on_file` is called as each file ends, `on_bytes` as bytes arrive."""
    import httpx

    s = settings or Settings()
    box = Folder(folder)
    stop = threading.Event()
    result = Result()
    lock = threading.Lock()
    own = client is None
    if client is None:
        client = httpx.Client(
            timeout=httpx.Timeout(s.timeout), follow_redirects=True,
            limits=httpx.Limits(max_connections=max(1, s.workers)),
            headers={"User-Agent": s.user_agent, "Accept-Encoding": "identity"},
        )

    def one(item: Item) -> None:
        try:
            outcome: Outcome = _one(client, box, item, s, on_bytes, stop)
        except (_Fail, OSError) as exc:  # OSError: this machine's side (disk full, permissions)
            outcome = "failed"
            reason = str(exc) if isinstance(exc, _Fail) else f"cannot write it: {exc.strerror or exc}"
            with lock:
                result.failures.append(Failure(item.name, item.url, reason))
        with lock:
            result.outcomes[item.name] = outcome
        if on_file is not None:
            on_file(item.name, outcome)

    pool = ThreadPoolExecutor(max_workers=max(1, s.workers), thread_name_prefix="fetch")
    try:
        for future in [pool.submit(one, item) for item in items]:
            future.result()
    except BaseException:  # Ctrl-C: no new file starts, those in flight stop at their next chunk
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        if own:
            client.close()
    result.failures.sort(key=lambda f: f.name)
    return result


def _one(client: httpx.Client, box: Folder, item: Item, s: Settings, on_bytes: Callable[[int], None] | None,
         stop: threading.Event) -> Outcome:
    if not safe_name(item.name):
        raise _Fail(f"{item.name!r} is not a plain file name; refused")
    final = box.root / item.name
    part = box.root / (item.name + PART)
    info = box.root / (item.name + PART + ".json")
    entry = box.entry(item.name)
    redo = False
    if final.exists():
        if entry is not None:
            size, digest = sha256_of(final)
            if entry.url == item.url and size == entry.size and digest == entry.sha256:
                return "verified"
        elif s.check(final) is None:  # put there by hand or by an earlier tool: kept if it is a whole file
            size, digest = sha256_of(final)
            box.record(item.name, ManifestEntry(url=item.url, size=size, sha256=digest))
            return "adopted"
        final.unlink()  # corrupt, truncated, or from another URL: downloaded again
        box.record(item.name, None)
        redo = True
    elif entry is not None and entry.url == item.url and part.exists():  # killed between manifest and rename
        size, digest = sha256_of(part)
        if size == entry.size and digest == entry.sha256:
            os.replace(part, final)
            info.unlink(missing_ok=True)
            return "resumed"
    resumed_from = part.stat().st_size if part.exists() and _part_info(info, item.url) is not None else 0
    last = ""
    asked: float | None = None  # the server's Retry-After, if it gave one
    for attempt in range(1, s.attempts + 1):
        if stop.is_set():
            raise _Fail("interrupted (what was downloaded is kept for the next run)")
        if attempt > 1:
            s.sleep(min(MAX_WAIT, max(s.backoff * 2 ** (attempt - 2), asked or 0.0)))
        try:
            _transfer(client, item.url, part, info, on_bytes, stop)
        except _Retry as exc:
            last, asked = str(exc), exc.wait
            continue
        problem = s.check(part)
        if problem is not None:
            part.unlink(missing_ok=True)
            info.unlink(missing_ok=True)
            if problem.retry:
                last = problem.reason
                continue
            raise _Fail(problem.reason)
        size, digest = sha256_of(part)
        box.record(item.name, ManifestEntry(url=item.url, size=size, sha256=digest))
        os.replace(part, final)
        info.unlink(missing_ok=True)
        if redo:
            return "redownloaded"
        return "resumed" if resumed_from else "downloaded"
    raise _Fail(f"{last} (gave up after {s.attempts} attempts)")


def _part_info(path: Path, url: str) -> PartInfo | None:
    try:
        info = PartInfo.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    return info if info.url == url else None


def _content_range(value: str | None) -> tuple[int, int | None] | None:
    """`bytes START-END/TOTAL` (TOTAL may be `*`) -> (START, TOTAL)."""
    if not value or not value.startswith("bytes "):
        return None
    try:
        span, total = value[6:].split("/", 1)
        start = int(span.split("-", 1)[0])
        return start, None if total.strip() == "*" else int(total)
    except ValueError:
        return None


def _transfer(client: httpx.Client, url: str, part: Path, info_path: Path,
              on_bytes: Callable[[int], None] | None, stop: threading.Event) -> None:
    """One attempt: continue `part` (or start it) up to the end of the body; raises _Retry/_Fail."""
    import httpx

    info = _part_info(info_path, url) if part.exists() else None
    offset = part.stat().st_size if info is not None else 0
    headers: dict[str, str] = {}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        validator = info.etag if info is not None and info.etag and not info.etag.startswith("W/") else \
            (info.last_modified if info is not None else None)
        if validator:
            headers["If-Range"] = validator
    try:
        with client.stream("GET", url, headers=headers) as r:
            status = r.status_code
            if status == 416:  # the part is not a prefix of what is there now: start again
                part.unlink(missing_ok=True)
                info_path.unlink(missing_ok=True)
                raise _Retry("HTTP 416 (range not satisfiable): starting the file again")
            if status >= 500 or status in RETRY_STATUS:
                raise _Retry(f"HTTP {status} {r.reason_phrase}".rstrip(), _retry_after(r.headers.get("Retry-After")))
            if status >= 400:
                raise _Fail(f"HTTP {status} {r.reason_phrase}".rstrip())
            if status == 206 and offset:
                span = _content_range(r.headers.get("Content-Range"))
                if span is None or span[0] != offset:
                    part.unlink(missing_ok=True)
                    info_path.unlink(missing_ok=True)
                    raise _Retry(f"the server answered another range ({r.headers.get('Content-Range')}) "
                                 f"than asked (from byte {offset}): starting the file again")
                total = span[1]
                mode = "ab"
            elif status == 200:
                length = r.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                offset = 0
                mode = "wb"
                info = PartInfo(url=url, etag=r.headers.get("ETag"), last_modified=r.headers.get("Last-Modified"),
                                total=total)
                info_path.write_text(info.model_dump_json(), encoding="utf-8")
            else:
                raise _Fail(f"unexpected HTTP {status} {r.reason_phrase}".rstrip())
            with part.open(mode) as fh:
                for chunk in r.iter_raw():
                    if stop.is_set():
                        raise _Fail("interrupted (what was downloaded is kept for the next run)")
                    fh.write(chunk)
                    fh.flush()  # what arrived is on disk even if this process is killed next
                    if on_bytes is not None:
                        on_bytes(len(chunk))
    except httpx.TimeoutException as exc:
        raise _Retry(f"timed out ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:  # refused, reset, or a body shorter than its Content-Length
        raise _Retry(f"{type(exc).__name__}: {exc}") from exc
    if total is not None and part.stat().st_size != total:
        raise _Retry(f"truncated body: {part.stat().st_size} of {total} bytes")
