"""The limits every untrusted file is opened under, in one place, and the verdict when one is hit.

Defaults suit this project's hardware (2 cores, a few GB): a file a model or a user hands us may
take 1 GiB of memory and 60 s to open, hold 1M cells, 100k paragraphs, and draw a page of at most
200 megapixels. The cell limit follows from the memory one: openpyxl holds a loaded cell in
~700 bytes (1M cells: ~700 MB and ~15 s here), so a bigger workbook would hit the memory limit
after a long parse; the count refuses it in a second. Each can be changed for a process with an environment variable
(`DESKBENCH_LIMIT_<FIELD>`, e.g. `DESKBENCH_LIMIT_SECONDS=120`) or in code with `use_limits`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deskbench.errors import UserError

MB = 1 << 20
ENV_PREFIX = "DESKBENCH_LIMIT_"


class FileLimits(BaseModel):
    """What one untrusted file may cost. Counts are checked before parsing where a cheap count
    exists (zip directory, a streaming count of XML elements, a page's size); memory and time
    bound the parse itself in a worker process."""

    model_config = ConfigDict(frozen=True)

    memory_mb: int = Field(1024, ge=64, description="address space a parse may add (RLIMIT_AS)")
    seconds: float = Field(60.0, gt=0, description="wall time of one parse, or of one step of it "
                                                   "(a PDF's page) where the parse reports progress")
    cells: int = Field(1_000_000, ge=1, description="cells of a workbook, all sheets")
    paragraphs: int = Field(100_000, ge=1, description="paragraphs (and table rows) of a document")
    slides: int = Field(10_000, ge=1, description="slides of a presentation")
    range_cells: int = Field(10_000_000, ge=1, description="cells one formula range may cover")
    formula_cells: int = Field(50_000_000, ge=1, description="cells all formulas of a workbook may read")
    page_megapixels: float = Field(200.0, gt=0, description="pixels of one rendered page image")
    zip_members: int = Field(10_000, ge=1, description="members of an office file (a zip)")
    zip_inflated_mb: int = Field(2048, ge=1, description="total inflated size of an office file")
    zip_ratio: int = Field(1000, ge=10, description="inflated / compressed size of any member")


LimitName = Literal["memory", "time", "cells", "paragraphs", "slides", "range_cells", "formula_cells",
                    "page_pixels", "zip_members", "zip_inflated", "zip_ratio"]


_WORDING: dict[str, tuple[str, str]] = {
    # what: (the limit, what the file needed); formatted with limit, observed, detail
    "memory": ("{limit:,.0f} MB memory", "reached {observed:,.0f} MB"),
    "time": ("{limit:g} s time", "stopped after {observed:.1f} s without progress"),
    "cells": ("{limit:,.0f}-cell", "holds {detail}{observed:,.0f} cells"),
    "paragraphs": ("{limit:,.0f}-paragraph", "holds {detail}{observed:,.0f} paragraphs"),
    "slides": ("{limit:,.0f}-slide", "holds {observed:,.0f} slides"),
    "range_cells": ("{limit:,.0f}-cell formula-range", "{detail} covers {observed:,.0f} cells"),
    "formula_cells": ("{limit:,.0f}-cell formula-read", "its formulas read {observed:,.0f} cells"),
    "page_pixels": ("{limit:,.0f}-megapixel page-image", "{detail}"),
    "zip_members": ("{limit:,.0f}-member", "holds {observed:,.0f} zip members"),
    "zip_inflated": ("{limit:,.0f} MB inflated-size", "inflates to {observed:,.0f} MB"),
    "zip_ratio": ("{limit:,.0f}x compression-ratio", "{detail} inflates {observed:,.0f}x"),
}


class LimitExceeded(BaseModel):
    """The typed verdict: which limit (`what`), its value, what the file needed or reached
    (`observed`; for memory and time, where it was stopped) and the file (`subject`).
    `message` is the one line shown and stored."""

    what: LimitName
    limit: float
    observed: float
    subject: str = "the file"
    detail: str = ""
    hint: str = ""  # how to get past it, where the caller knows (a lower --dpi)

    @property
    def message(self) -> str:
        limit, observed = _WORDING[self.what]
        fields = {"limit": self.limit, "observed": self.observed, "detail": self.detail}
        return (f"{self.subject} exceeds the {limit.format(**fields)} limit ({observed.format(**fields)})"
                + (f"; {self.hint}" if self.hint else ""))

    def about(self, subject: str, hint: str | None = None) -> LimitExceeded:
        """The same verdict naming `subject` (a file name, "output file report.docx")."""
        return self.model_copy(update={"subject": subject, **({"hint": hint} if hint is not None else {})})


class FileLimitError(UserError):
    """An untrusted file over a limit; `verdict` says which. A UserError, so a user's own file
    ends the command with its one line (exit 2); scorers catch it and record the verdict."""

    def __init__(self, verdict: LimitExceeded) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict

    def __reduce__(self) -> tuple[type[FileLimitError], tuple[LimitExceeded]]:
        return (type(self), (self.verdict,))


_override: FileLimits | None = None


def limits_from_env(environ: dict[str, str] | None = None) -> FileLimits:
    """FileLimits with every `DESKBENCH_LIMIT_<FIELD>` variable applied; a bad value is one line."""
    env = os.environ if environ is None else environ
    given = {name: env[ENV_PREFIX + name.upper()] for name in FileLimits.model_fields
             if ENV_PREFIX + name.upper() in env}
    try:
        return FileLimits.model_validate(given)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ENV_PREFIX + str(err["loc"][0]).upper()
        raise UserError(f"{name}={given.get(str(err['loc'][0]))!r}: {err['msg']}; "
                        f"unset it or give a valid number") from None


def current_limits() -> FileLimits:
    """The limits in force: `use_limits`'s if inside one, else the environment's."""
    return _override if _override is not None else limits_from_env()


@contextmanager
def use_limits(limits: FileLimits) -> Iterator[FileLimits]:
    """Open files under `limits` inside the block (tests, benchmarks)."""
    global _override
    before, _override = _override, limits
    try:
        yield limits
    finally:
        _override = before
