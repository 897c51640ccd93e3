"""The CLI's two consoles (results on stdout, messages on stderr) and the percent format, one home for
every command module."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:  # a type hint only: the CLI starts without pydantic
    from pydantic import BaseModel

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def pct(value: float | None, ci: tuple[float, float] | None = None) -> str:
    if value is None:
        return "–"
    text = f"{100 * value:.1f}"
    if ci is not None:
        text += f" ± {100 * (ci[1] - ci[0]) / 2:.1f}"
    return text


def print_system_reports(reports: Mapping[str, BaseModel]) -> None:
    """`score RUN --json` for a track with one report per system: always a mapping system -> report,
    one system or many, so a script reads the same shape whatever `--system` and the run hold."""
    print(json.dumps({name: r.model_dump(mode="json") for name, r in reports.items()}, indent=2, ensure_ascii=False))
