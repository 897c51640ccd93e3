"""What the episode viewer (`deskbench view`) shows of a track, as data the track hands the core.

A track fills `Track.viewer_views` (contract/track.py) with a `ViewerViews` whose methods say how
its task, its submission and its scores look; every method's default returns None and the core
shows its own default (the task's question or JSON, the submission as JSON, the scores from
`Track.outcomes` with no details). So the viewer (web/viewer_data.py, web/viewer_scores.py)
names no track, and a fourth track shows its own view from its one folder.

pydantic only at run time: the core's web modules and every track import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from deskbench.runs.outcomes import ItemOutcome
    from deskbench.runs.store import Episode, RunStore

Page = tuple[str, int]  # (document, page)
Key = tuple[str, int]  # (task id, attempt)

Outcome = Literal["correct", "wrong", "unscored"]  # an episode's outcome in the viewer's table
OFFLINE = "the track's default scorer, offline (no judge): no stored scoring covers it (run 'deskbench score')"


class TaskView(BaseModel):
    """A task as the episode page and the table show it."""

    question: str
    gold: list[str] = Field(default_factory=list)  # acceptable answers / what a correct output is
    gold_pages: list[Page] = Field(default_factory=list)
    hop_type: str | None = None
    facts: list[tuple[str, str]] = Field(default_factory=list)  # (label, value): category, inputs, ...


class FileView(BaseModel):
    """An output file as the episode page lists it: by its position in the submission's list,
    which is all its URL carries (never a path)."""

    n: int
    name: str
    size: int
    image: str | None = None  # the media type of a raster image that decodes as one (shown inline)
    found: bool = True  # False: recorded, but not in the run directory


class AnswerView(BaseModel):
    """A submission as the episode page shows it."""

    answer: list[str] = Field(default_factory=list)
    cited: list[Page] = Field(default_factory=list)
    files: list[FileView] = Field(default_factory=list)


class EpisodeScore(BaseModel):
    """What the viewer shows about one episode's score."""

    source: str = OFFLINE  # which scoring produced it: a stored one by number, settings and time, or offline
    stored: bool = False  # from a scoring stored in the run
    scoring: int | None = None  # that scoring's number
    status: Literal["scored", "unscored"] = "unscored"
    score: float | None = None
    correct: bool | None = None
    why_unscored: str = ""
    error_class: str | None = None  # the track's class of a wrong item (docqa's MADQA H.3, analytics' error category)
    metrics: dict[str, Any] = Field(default_factory=dict)  # name -> value, in the track's words
    reasoning: list[tuple[str, str]] = Field(default_factory=list)  # (who, why): a judge's or scorer's reason
    verifiers: list[dict[str, Any]] = Field(default_factory=list)  # checks run on the output: id, kind, status, evidence
    rubric: dict[str, int] | None = None  # criterion -> grade, when graded

    @property
    def outcome(self) -> Outcome:
        """correct / wrong / unscored: the table's filter."""
        if self.status != "scored":
            return "unscored"
        return "correct" if self.correct else "wrong"

    def with_outcome(self, o: ItemOutcome) -> EpisodeScore:
        """This score with the outcome's status, score and correct (the track's own converter
        decided them): the offline scores of every track go through it."""
        if o.status != "scored":
            return self.model_copy(update={"why_unscored": "the track's scorer could not decide it offline"})
        return self.model_copy(update={"status": "scored", "score": o.score, "correct": o.correct})


Scores = dict[Key, EpisodeScore]


class ViewerViews:
    """A track's views in the episode viewer. Subclass it and override what the track has; each
    default returns None (the core's default view)."""

    stamped: ClassVar[Mapping[str, str | None]] = {}
    """Tables of the run's SQLite a score is also computed from (table -> its rows' time column,
    or None to count rows), beyond the core's (tasks, episodes, scorings): a write to one makes
    the viewer score again (a new rubric grade, say)."""

    def task(self, task: BaseModel) -> TaskView | None:
        """The task's question, gold and facts; None: its `question` field, else its JSON."""
        return None

    def answer(self, submission: BaseModel) -> AnswerView | None:
        """The submission's answer, citations and output files; None: its JSON."""
        return None

    def scores(self, store: RunStore, system: str) -> Scores | None:
        """Every episode's score of `system` from the track's default scorer with no judge and no
        network (the viewer's offline scores, with their details); None: `Track.outcomes` with
        its default options, no details."""
        return None

    def stored(self, row: Mapping[str, Any]) -> EpisodeScore | None:
        """The details of an item of a stored scoring, from its `--items-out` row (the stored
        outcome is the core's to add); None: no details. A row it cannot read: ValueError."""
        return None

    def no_model_calls(self, store: RunStore, episode: Episode) -> str | None:
        """Why an episode of this track has no model calls when the track knows (a person answered
        it, it was imported from a predictions file), in words; None: the core's reasons."""
        return None

    def episode_metrics(self, task: BaseModel | None, episode: Episode) -> dict[str, Any]:
        """Figures read off the episode itself rather than a scoring (docqa: its searches against
        the gold pages), shown beside its score's metrics whichever scoring is shown; none by default."""
        return {}
