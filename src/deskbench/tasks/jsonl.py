"""JSON Lines readers that validate every line and say exactly where a bad one is.

A bad line stops the read with a UserError naming the file, the line and the field (the CLI
turns it into one line and exit code 2), or, with `skip_invalid`, is skipped and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from deskbench.errors import UserError

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
    where = ".".join(str(p) for p in err["loc"]) or "(line)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field '{where}': {err['msg']}{more}"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    yield number, line
    except FileNotFoundError as exc:
        raise UserError(f"{path}: no such file; check the path") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason}); save it as UTF-8 JSON Lines") from exc


def read_jsonl(
    path: Path,
    model: type[M],
    *,
    skip_invalid: bool = False,
    context: dict[str, Any] | None = None,
) -> ReadResult[M]:
    """Every non-blank line of `path` as a `model`; see the module docstring for bad lines."""
    result: ReadResult[M] = ReadResult(items=[])
    hint = "fix the line, or pass --skip-invalid to skip bad lines"
    for number, line in _lines(path):
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
            result.items.append(model.model_validate(data, context=context))
        except ValidationError as exc:
            error = LineError(str(path), number, _describe(exc))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            error = LineError(str(path), number, f"invalid JSON ({exc})")
        else:
            continue
        if not skip_invalid:
            raise UserError(f"{error}; {hint}")
        result.skipped.append(error)
    return result


def write_jsonl(path: Path, items: list[BaseModel]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(item.model_dump_json(exclude_none=True) + "\n")
