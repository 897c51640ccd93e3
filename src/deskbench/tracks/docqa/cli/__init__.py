"""The docqa track's commands of `deskbench`, with their line and place in `deskbench --help`:
`COMMANDS` is what Track.cli_commands returns (track.py) and the `deskbench.cli` entry point
(pyproject.toml), read by `--help` without loading the track: this module imports nothing heavy."""

from __future__ import annotations

from deskbench.cli.panels import DATA, RESULTS
from deskbench.contract.cli import TrackCommand

COMMANDS: tuple[TrackCommand, ...] = (
    TrackCommand("analyse", "deskbench.tracks.docqa.cli.analyse:register", group="analyse"),  # its family of analyses
    TrackCommand("retrieve", "deskbench.tracks.docqa.cli.retrieve:register", panel=RESULTS, after="analyse",
                 summary="Retrieval alone: recall@k and MRR of retrievers over tasks"),
    TrackCommand("stores", "deskbench.tracks.docqa.agents.managed_rag.cli:register", panel=DATA, after="import",
                 summary="List or delete the managed-RAG stores made for a corpus"),
    TrackCommand("import", "deskbench.tracks.docqa.cli.imports:register", panel=DATA, before="schema",
                 summary="Make a run from a predictions file"),
    TrackCommand("docqa", "deskbench.tracks.docqa.cli.generate:register", group="generate"),
    TrackCommand("madqa", "deskbench.tracks.docqa.cli.fetch:register", group="fetch"),
)
