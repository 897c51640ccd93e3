"""Named decoding presets: the per-model sampling a paper ran with, chosen by `--decoding NAME`.

A paper that sets decoding per model (AIDABench, Appendix E, Table 3) cannot be reproduced by one
--temperature for every model, and copying its table into flags by hand loses which row was meant.
So the table is data (`decoding.toml` beside this module, each preset naming its source), a run
names the preset, and each model of the run gets its own row: `resolve_preset` finds the row by
the model's name (or the row the user named with NAME:ROW), and models/settings.py sends its
numbers where the model takes them and records the rest as not sent. The core knows presets by
name only; which benchmark a preset belongs to is in its `source`, not in code.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deskbench.errors import UserError

PRESETS_FILE = Path(__file__).with_name("decoding.toml")
FIELDS = ("temperature", "top_p", "top_k")  # what a preset row sets
Unsent = Literal["default", "unset"]  # the paper's "default" (not overridden) and "–" (not set)


class PresetRow(BaseModel):
    """One model's row: a number is sent; "default" / "unset" leave the provider's default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str  # as the paper names it
    match: list[str] = Field(default_factory=list)  # globs over model names; empty: `model` itself
    temperature: float | Unsent = "default"
    top_p: float | Unsent = "default"
    top_k: int | Unsent = "default"
    note: str = ""  # the paper's note for the row

    def globs(self) -> list[str]:
        return [g.lower() for g in (self.match or [self.model])]

    def values(self) -> dict[str, float | int]:
        """The numbers the row sets (the parameters to send)."""
        out: dict[str, float | int] = {}
        for name in FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                out[name] = value
        return out

    def table(self) -> str:
        """The row as the paper prints it: `temperature=0.7, top_p=0.8, top_k=20`."""
        return ", ".join(f"{name}={getattr(self, name)}" for name in FIELDS)


class Preset(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # where the table comes from (paper, appendix, table)
    rule: str = ""  # how the paper chose the values, in its words
    models: list[PresetRow]


class PresetTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    presets: dict[str, Preset]


class ResolvedPreset(BaseModel):
    """A preset's row chosen for one model: what models/settings.py sends and records."""

    model_config = ConfigDict(frozen=True)

    name: str  # the preset
    row: PresetRow
    source: str
    picked: bool = False  # the user named the row (NAME:ROW) rather than the model's name matching it

    def label(self) -> str:
        """How the run records it: `aida:qwen3-max-2026-01-23`."""
        return f"{self.name}:{self.row.model}"


@functools.cache
def presets() -> dict[str, Preset]:
    """The built-in presets (decoding.toml); a broken file is deskbench's bug, said in one line."""
    try:
        return PresetTable.model_validate(tomllib.loads(PRESETS_FILE.read_text())).presets
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise UserError(f"decoding preset table {PRESETS_FILE} is unusable ({str(exc).splitlines()[0]}); "
                        "reinstall deskbench") from exc


def _bare(model_id: str) -> str:
    """The model's name as rows are matched: no provider, no org/ or models/ prefix, lower case
    ("vllm/Qwen/Qwen3-30B-A3B-Instruct-2507" -> "qwen3-30b-a3b-instruct-2507")."""
    return model_id.split("/", 1)[-1].rsplit("/", 1)[-1].lower()


def preset_names() -> list[str]:
    return sorted(presets())


def check_spec(spec: str) -> None:
    """The --decoding value names a preset (and a row of it), or one line saying what exists."""
    _split(spec)


def _split(spec: str) -> tuple[str, Preset, PresetRow | None]:
    name, _, row_name = spec.partition(":")
    table = presets()
    preset = table.get(name.strip().lower())
    if preset is None:
        raise UserError(f"--decoding {spec}: no such preset; deskbench has " + ", ".join(preset_names())
                        + " (e.g. --decoding aida, or --decoding aida:ROW for one row of its table)")
    if not row_name:
        return name.strip().lower(), preset, None
    for row in preset.models:
        if row.model.lower() == row_name.strip().lower():
            return name.strip().lower(), preset, row
    raise UserError(f"--decoding {spec}: {name} has no row {row_name!r}; its rows: "
                    + ", ".join(r.model for r in preset.models))


def resolve_preset(spec: str, model_id: str) -> ResolvedPreset:
    """The row of preset `spec` ("aida" or "aida:ROW") for `model_id`; UserError naming the models
    the preset covers when none matches."""
    name, preset, row = _split(spec)
    if row is not None:
        return ResolvedPreset(name=name, row=row, source=preset.source, picked=True)
    bare = _bare(model_id)
    for candidate in preset.models:
        if any(fnmatch.fnmatchcase(bare, g) for g in candidate.globs()):
            return ResolvedPreset(name=name, row=candidate, source=preset.source)
    raise UserError(f"--decoding {name}: {model_id} is not in its table ({preset.source}), which covers "
                    + ", ".join(r.model for r in preset.models)
                    + f"; name the row with --decoding {name}:ROW, or drop --decoding for this model")
