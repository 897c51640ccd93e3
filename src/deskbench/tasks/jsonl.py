"""JSON Lines readers that validate every line and say exactly where a bad one is.

A bad line stops the read with a UserError naming the file, the line and the field (the CLI
turns it into one line and exit code 2), or, with `skip_invalid`, is skipped and counted.

Every file is read under caps (`JsonlCaps`, one per kind of file): only a regular file is opened
(a FIFO would block, /dev/zero never ends, a directory is no file), its size is checked before the
first byte is read, it is read a line at a time (never the whole file at once) and a line over
the line cap is refused before it is parsed; a line that is not UTF-8 or not JSON is one line
naming file:line. Shape caps (citations per answer and the like) are the readers' (`shape`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from deskbench.errors import UserError, grew_past, megabytes, open_user_file

M = TypeVar("M", bound=BaseModel)

MB = 1 << 20


@dataclass(frozen=True)
class JsonlCaps:
    """What one kind of JSON Lines file may hold: `max_bytes` in all, `max_line` bytes a line.
    The file cap bounds the time a read takes, the line cap the memory one parsed line takes
    (pydantic holds a parsed line as objects, ~10x its bytes)."""

    what: str  # how the file is named in a message: "the predictions file"
    max_bytes: int
    max_line: int


PREDICTIONS = JsonlCaps("the predictions file", 256 * MB, 8 * MB)
"""A predictions file: the official BM25 agent's file for all of MADQA's 2,250 questions (every
step's text and the pages each search returned in its trajectory) is, at ~10-20 KB a row, tens
of MB; 256 MB is several times that and still reads in a few minutes. A line is one question's
prediction with its whole trajectory: 8 MB holds 100 steps of 80 KB each."""
TASKS = JsonlCaps("the tasks file", 64 * MB, 4 * MB)
"""A tasks file: MADQA's 2,250 questions take ~1 MB; 64 MB is ~50x that."""
WEB_INDEX = JsonlCaps("the recorded-web index", 64 * MB, 4 * MB)
"""A recorded web's index.jsonl: a line per saved page or search (~1 KB, a search's hits ~10 KB)."""
ANY_JSONL = JsonlCaps("the JSON Lines file", 256 * MB, 8 * MB)


def open_capped(path: Path, caps: JsonlCaps) -> IO[bytes]:
    """`path` opened for reading if it is a regular file within `caps.max_bytes`; else one line."""
    return open_user_file(path, caps.what, caps.max_bytes)


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def capped_lines(path: Path, caps: JsonlCaps, *, digest: _Digest | None = None,
                 skip_invalid: bool = False, skipped: list[LineError] | None = None, can_skip: bool = True,
                 ) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of `path` as (number, bytes), read one at a time under `caps`, each
    checked to be UTF-8 (pydantic would parse it as such but name the column, not the byte). A line
    over the cap or not UTF-8 is a UserError naming file:line, or, with `skip_invalid`, left out and
    added to `skipped`. `digest` is fed every byte read (the file's sha256 in the same pass).
    `can_skip`: the command has --skip-invalid (the message offers it)."""
    skip = ", or pass --skip-invalid to skip bad lines" if can_skip else ""
    number = total = 0
    with open_capped(path, caps) as fh:

        def piece() -> bytes:
            """At most a line cap's worth (+1) of the next line, counted and hashed."""
            nonlocal total
            raw = fh.readline(caps.max_line + 1)
            total += len(raw)
            if digest is not None:
                digest.update(raw)
            if total > caps.max_bytes:  # grew while being read
                raise grew_past(path, caps.max_bytes, caps.what)
            return raw

        while raw := piece():
            if len(raw) > caps.max_line and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # the rest of the line, a bounded piece at a time
                    raw = piece()
                number += 1
                error = LineError(str(path), number, f"the line is over the {megabytes(caps.max_line)} line cap "
                                                     f"of {caps.what}")
                if not skip_invalid:
                    raise UserError(f"{error}; shorten or split it{skip}")
                if skipped is not None:
                    skipped.append(error)
                continue
            if number == 0:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM (Notepad, Excel's "CSV UTF-8") is no content
            for line in raw.splitlines() or [b""]:
                number += 1
                if not line.strip():
                    continue
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    error = LineError(str(path), number, f"not UTF-8 (byte 0x{line[exc.start]:02x} at column "
                                                         f"{exc.start + 1}); save the file as UTF-8")
                    if not skip_invalid:
                        raise UserError(f"{error}{skip}") from None
                    if skipped is not None:
                        skipped.append(error)
                    continue
                yield number, line


@dataclass(frozen=True)
class LineError:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class ReadResult(Generic[M]):
    items: list[M]
    skipped: list[LineError] = field(default_factory=list)


def _describe(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    if err["type"] == "json_invalid":
        return f"invalid JSON ({err['ctx'].get('error', err['msg']) if err.get('ctx') else err['msg']})"
    if err["type"] in ("model_type", "model_attributes_type") and not err["loc"]:
        return "expected a JSON object on this line"
    where = ".".join(str(p) for p in err["loc"]) or "(line)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field '{where}': {err['msg'].removeprefix('Value error, ')}{more}"


def iter_jsonl(
    path: Path,
    model: type[M],
    *,
    caps: JsonlCaps = ANY_JSONL,
    skip_invalid: bool = False,
    skipped: list[LineError] | None = None,
    context: dict[str, Any] | None = None,
    shape: Callable[[M], str | None] | None = None,
    digest: _Digest | None = None,
) -> Iterator[tuple[int, M]]:
    """Every valid line of `path` as (number, `model`), one line in memory at a time; a bad line
    (over a cap, not UTF-8, not JSON, refused by the model, or a `shape` problem: what `shape`
    returns) is a UserError naming file:line, or, with `skip_invalid`, added to `skipped`."""
    hint = "fix the line, or pass --skip-invalid to skip bad lines"
    for number, line in capped_lines(path, caps, digest=digest, skip_invalid=skip_invalid, skipped=skipped):
        try:
            item = model.model_validate_json(line, context=context)
        except ValidationError as exc:
            error = LineError(str(path), number, _describe(exc))
        else:
            problem = shape(item) if shape is not None else None
            if problem is None:
                yield number, item
                continue
            error = LineError(str(path), number, problem)
        if not skip_invalid:
            raise UserError(f"{error}; {hint}")
        if skipped is not None:
            skipped.append(error)


def read_jsonl(
    path: Path,
    model: type[M],
    *,
    skip_invalid: bool = False,
    context: dict[str, Any] | None = None,
    unique_id: bool = False,
    caps: JsonlCaps = ANY_JSONL,
    shape: Callable[[M], str | None] | None = None,
) -> ReadResult[M]:
    """Every non-blank line of `path` as a `model`; see the module docstring for bad lines.
    `unique_id`: a line whose `id` an earlier line has is a bad line (tasks: episodes, folders
    and scores are keyed by id, so the second would silently stand for the first)."""
    result: ReadResult[M] = ReadResult(items=[])
    first_line: dict[object, int] = {}
    for number, item in iter_jsonl(path, model, caps=caps, skip_invalid=skip_invalid, skipped=result.skipped,
                                   context=context, shape=shape):
        key = getattr(item, "id", None) if unique_id else None
        if key is None or key not in first_line:
            if key is not None:
                first_line[key] = number
            result.items.append(item)
            continue
        error = LineError(str(path), number, f"task id {key!r} is already on line {first_line[key]}; "
                                             "give each task its own id")
        if not skip_invalid:
            raise UserError(f"{error}; fix the line, or pass --skip-invalid to skip bad lines")
        result.skipped.append(error)
    return result


def first_row(path: Path) -> object:
    """The JSON value on the first non-blank line of a JSON Lines file (UTF-8, a BOM allowed), or
    None when the file cannot be read or that line parsed: for telling a file's kind by its first row."""
    try:
        with path.open(encoding="utf-8-sig") as fh:
            first = next((line for line in fh if line.strip()), "")
        return json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def write_jsonl(path: Path, items: Sequence[object]) -> None:
    """One JSON object a line: pydantic models and dataclasses alike."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for item in items:
            fh.write(to_json(item, exclude_none=True) + b"\n")
