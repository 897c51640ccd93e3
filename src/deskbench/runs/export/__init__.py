"""`deskbench export`: a run's episodes written in another tool's format, one registry of formats.

A format is an `Exporter` registered by name; `export_run` opens the run and hands it over. The
built-in: `inspect` writes one Inspect AI eval log per system (runs/export/inspect_log.py), so
`inspect view` opens deskbench runs. A track adds its own through its `export_formats` hook
(docqa: `madqa`, the official MADQA predictions files, tracks/docqa/export_madqa.py, which the
official evaluator reads and `deskbench import` takes back). Another format (a JSONL of samples,
another viewer's log) is one new module that calls `register_format`, with no edit to the command."""

from __future__ import annotations

import importlib
from pathlib import Path

from deskbench.contract.export import Exporter, ExportOptions
from deskbench.errors import UserError

BUILTIN = {"inspect": "deskbench.runs.export.inspect_log"}  # name -> module holding EXPORTER


_FORMATS: dict[str, Exporter] = {}


def register_format(exporter: Exporter) -> None:
    """Add a format (a plugin's, a test's); a second one under a taken name is refused."""
    known = _FORMATS.get(exporter.name)
    if known is not None and known is not exporter:
        raise UserError(f"an export format named {exporter.name!r} is already registered; choose another name")
    _FORMATS[exporter.name] = exporter


def formats() -> dict[str, Exporter]:
    """Every format by name: the built-ins, those registered, each track's (`Track.export_formats`;
    the built-ins are imported on first use: their libraries are optional and load only
    when their format is asked for)."""
    from deskbench.contract.registry import tracks

    for name, module in BUILTIN.items():
        if name not in _FORMATS:
            _FORMATS[name] = importlib.import_module(module).EXPORTER
    found = dict(_FORMATS)
    for track in tracks().values():  # asked each time: a track unregistered takes its formats along
        for exporter in track.export_formats():
            found.setdefault(exporter.name, exporter)
    return found


def export_run(run_dir: Path, fmt: str, out: Path, options: ExportOptions | None = None) -> list[Path]:
    """Write the run at `run_dir` as `fmt` under `out`; a user's mistake is one UserError line."""
    exporter = formats().get(fmt)
    if exporter is None:
        raise UserError(f"unknown export format {fmt!r}; the formats are: {', '.join(formats())}")
    from deskbench.paths import require_run

    require_run(run_dir)  # a typo names the runs nearby
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {out} is a file; give a directory to write the {fmt} export into")
    return exporter.export(run_dir, out, options or ExportOptions())
