"""A track's web screens for people, as `deskbench serve` asks for them (Track.web_screens).

`deskbench serve` (cli/serve.py) hands each track's `WebScreens` the command's flags as a
`ServeRequest`; the track that serves them (docqa: the human baseline, with --corpus and --tasks;
deliverables: rubric grading of a deliverables run given alone) answers with a `ServedApp`, the
others with None. `serve batches` asks them for the tasks to batch and the systems a person's
work is stored as; the judge calibration screens (web/calibration.py) ask a track how one item
of its runs is shown to a labeller (analytics: its instruction, key points, chart or files). So the command names no track, and a fourth track's screens live in its folder.

Nothing of deskbench at run time: every core module and track may import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI
    from pydantic import BaseModel

    from deskbench.scoring.judge_calibration import CalibrationItem


@dataclass(frozen=True)
class ServeRequest:
    """`deskbench serve`'s flags, as given (None: not given)."""

    out: Path | None  # the run directory the work is saved in (--out)
    corpus: Path | None = None  # --corpus
    tasks: Path | None = None  # --tasks
    oracle: bool = False  # --oracle: the gold evidence pages instead of search
    top_k: int = 5  # --top-k: pages per search
    calibration: Path | None = None  # --calibration: judge calibration items to label too
    batch_size: int = 25  # --batch-size: questions per batch for tasks in no batch yet
    run_track: str | None = None  # the track of the run at --out when it holds one (the core reads it)


@dataclass
class ServedApp:
    """A track's app, what the start-up line calls it, and warnings to print before serving."""

    app: FastAPI
    what: str  # "human baseline", "rubric grading"
    warnings: list[str] = field(default_factory=list)


class WebScreens:
    """A track's screens for people. Subclass it and override what the track has; each default
    says "not this track's"."""

    def app(self, request: ServeRequest) -> ServedApp | None:
        """The app that serves `request`, when it is this track's; a request that is this
        track's but wrong (a bad --top-k) is a UserError; None: not this track's."""
        return None

    def batch_tasks(self, tasks: Path) -> Sequence[BaseModel] | None:
        """`serve batches --tasks FILE`: the tasks of the file people answer in batches (read as
        the app reads them); None: this track cuts no batches."""
        return None

    def people_systems(self, user: str) -> Sequence[str]:
        """The systems a person's answers are stored as (their batches' progress)."""
        return ()

    def calibration_item(self, item: CalibrationItem, n: int) -> str | None:
        """How `serve --calibration` shows item `n` (1-based) of this track's runs to a labeller:
        HTML, escaped, with only what a labeller may see (never the judge's verdict, score, reason
        or name, nor the system); the item's chart and files are served at /calibration/{n}/chart
        and /calibration/{n}/file/output|reference (web/calibration.py). None (the default): the
        core's view, the question, the gold answer variants and the prediction."""
        return None
