"""The deliverables track's commands of `deskbench`, with their line and place in `deskbench --help`:
`COMMANDS` is what Track.cli_commands returns (track.py) and the `deskbench.cli` entry point
(pyproject.toml), read by `--help` without loading the track: this module imports nothing heavy."""

from __future__ import annotations

from deskbench.cli.panels import PEOPLE, TOOLS
from deskbench.contract.cli import TrackCommand

COMMANDS: tuple[TrackCommand, ...] = (
    TrackCommand("rubric", "deskbench.tracks.deliverables.cli.rubric:register", panel=PEOPLE, after="serve",
                 summary="Rubric grades of deliverables runs, QC"),
    TrackCommand("verify", "deskbench.tracks.deliverables.cli.verify:register", panel=TOOLS,
                 summary="Check one deliverables response"),
    TrackCommand("deliverables", "deskbench.tracks.deliverables.cli.generate:register", group="generate"),
    TrackCommand("dra", "deskbench.tracks.deliverables.cli.fetch:register", group="fetch"),
)
