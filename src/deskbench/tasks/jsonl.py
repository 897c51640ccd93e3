"""JSON Lines readers that validate every line and say exactly where a bad one is.

A bad line stops the read with a UserError naming the file, the line and the field (the CLI
turns it into one line and exit code 2), or, with `skip_invalid`, is skipped and counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from deskbench.errors import UserError, read_user_file

M = TypeVar("M", bound=BaseModel)


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
    return f"field '{where}': {err['msg']}{more}"


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Non-blank lines as bytes: pydantic parses UTF-8 itself, and reports bad encoding per line."""
    data = read_user_file(path, "the JSON Lines file")
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM (Notepad, Excel's "CSV UTF-8") is no content
    for number, line in enumerate(data.splitlines(), 1):
        if line.strip():
            yield number, line


def read_jsonl(
    path: Path,
    model: type[M],
    *,
    skip_invalid: bool = False,
    context: dict[str, Any] | None = None,
    unique_id: bool = False,
) -> ReadResult[M]:
    """Every non-blank line of `path` as a `model`; see the module docstring for bad lines.
    `unique_id`: a line whose `id` an earlier line has is a bad line (tasks: episodes, folders
    and scores are keyed by id, so the second would silently stand for the first)."""
    result: ReadResult[M] = ReadResult(items=[])
    hint = "fix the line, or pass --skip-invalid to skip bad lines"
    first_line: dict[object, int] = {}
    for number, line in _lines(path):
        try:
            item = model.model_validate_json(line, context=context)
        except ValidationError as exc:
            error = LineError(str(path), number, _describe(exc))
        else:
            key = getattr(item, "id", None) if unique_id else None
            if key is None or key not in first_line:
                if key is not None:
                    first_line[key] = number
                result.items.append(item)
                continue
            error = LineError(str(path), number, f"task id {key!r} is already on line {first_line[key]}; "
                                                 "give each task its own id")
        if not skip_invalid:
            raise UserError(f"{error}; {hint}")
        result.skipped.append(error)
    return result


def write_jsonl(path: Path, items: Sequence[object]) -> None:
    """One JSON object a line: pydantic models and dataclasses alike."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for item in items:
            fh.write(to_json(item, exclude_none=True) + b"\n")
