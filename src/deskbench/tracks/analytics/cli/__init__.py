"""The analytics track's commands of `deskbench`, with their line and place in `deskbench --help`:
`COMMANDS` is what Track.cli_commands returns (track.py) and the `deskbench.cli` entry point
(pyproject.toml), read by `--help` without loading the track: this module imports nothing heavy."""

from __future__ import annotations

from deskbench.cli.panels import DATA, TOOLS
from deskbench.contract.cli import TrackCommand

COMMANDS: tuple[TrackCommand, ...] = (
    TrackCommand("import-tasks", "deskbench.tracks.analytics.cli.import_tasks:register", panel=DATA, after="fetch",
                 summary="Convert a released benchmark's tasks"),
    TrackCommand("compare-sheets", "deskbench.tracks.analytics.cli.compare_sheets:register", panel=TOOLS,
                 after="sandbox", summary="Judge a spreadsheet against a reference"),
    TrackCommand("analytics", "deskbench.tracks.analytics.cli.generate:register", group="generate"),
    TrackCommand("aida", "deskbench.tracks.analytics.cli.fetch:register", group="fetch"),
    TrackCommand("task-stats", "deskbench.tracks.analytics.cli.analyse:register", group="analyse"),
)
