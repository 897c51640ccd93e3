"""What the episode viewer shows, as data: the runs it was given, one row per episode (run,
system, task, attempt, outcome, score, effort, cost, hop type, error class), the table's filters
and sorting, and each track's view of a task (question, gold) and of a submission (answer,
citations, files). The HTTP side is web/viewer.py; scores come from web/viewer_scores.py.

What a task and a submission show is the track's (Track.viewer_views, contract/viewer.py): a
track without views (a plugin's) shows its task's question or JSON and its submission as JSON,
with no edit here."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from deskbench.contract.viewer import AnswerView, FileView, Outcome, Page, TaskView, ViewerViews
from deskbench.errors import UserError
from deskbench.paths import require_run
from deskbench.runs.diagnose import diagnose_episode
from deskbench.runs.store import Episode, RunStore, UnreadableEpisode
from deskbench.runs.transcript import ModelCallEvent, TranscriptDoc
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.web.params import parse_number
from deskbench.web.viewer_scores import EpisodeScore, Scores, system_scores, views_of
from deskbench.web.viewer_scores import stamp as run_stamp

PAGE_SIZE = 200

__all__ = ["AnswerView", "FileView", "Page", "TaskView"]  # the views' types, as the viewer's pages know them


# -- what a task and a submission show ---------------------------------------------------------

def task_view(task: BaseModel | None, views: ViewerViews) -> TaskView:
    """The task as its track shows it; else its `question` field, else its JSON."""
    if task is None:
        return TaskView(question="(the run does not hold this task)")
    shown = views.task(task)
    if shown is not None:
        return shown
    return TaskView(question=str(getattr(task, "question", "") or task.model_dump_json(indent=1)))


def answer_view(submission: BaseModel | None, views: ViewerViews) -> AnswerView:
    """The submission as its track shows it; else its JSON."""
    if submission is None:
        return AnswerView()
    shown = views.answer(submission)
    return shown if shown is not None else AnswerView(answer=[submission.model_dump_json(indent=1)])


# -- the runs and their episodes ----------------------------------------------------------------

@dataclass
class ViewerRun:
    key: str  # the directory's name (made unique): what URLs name the run by
    dir: Path
    store: RunStore
    track: str
    tasks: dict[str, BaseModel] = field(default_factory=dict)
    views: ViewerViews = field(default_factory=ViewerViews)  # how its track shows itself (contract/viewer.py)


def output_file(run: ViewerRun, episode: Episode, n: int) -> Path | None:
    """The episode's n-th output file on disk: named by the submission's own list, resolved
    (symlinks too) inside the episode's own folder (runs/outputs.py), a regular file; else None."""
    from deskbench.runs.outputs import episode_outputs
    from deskbench.runs.outputs import output_file as contained

    files = getattr(episode.submission, "files", None)
    if not isinstance(files, list) or not 0 <= n < len(files):
        return None
    return contained(episode_outputs(run.dir, episode), str(getattr(files[n], "name", "")))


def with_files(view: AnswerView, run: ViewerRun, episode: Episode) -> AnswerView:
    """`view` with each output file found on disk and, when it decodes as a raster image
    (png, jpeg, gif, webp; never svg: the name's suffix is not trusted), its media type."""
    from deskbench.web.images import image_type

    files = []
    for f in view.files:
        path = output_file(run, episode, f.n)
        files.append(f.model_copy(update={"found": path is not None,
                                          "image": image_type(path) if path is not None else None}))
    return view.model_copy(update={"files": files})


def open_runs(run_dirs: Sequence[Path]) -> list[ViewerRun]:
    """Each directory as a run (a directory given twice is one); a directory that is not a run is
    the user's to fix."""
    runs: list[ViewerRun] = []
    seen: set[Path] = set()
    for d in run_dirs:
        resolved = Path(d).resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        require_run(Path(d))  # a typo names the runs nearby
        store = RunStore(resolved, create=False)
        base = (resolved.name or "run").replace(":", "_")  # ':' separates an episode id's parts
        key, n = base, 2
        while any(r.key == key for r in runs):
            key, n = f"{base}-{n}", n + 1
        track = store.track()
        runs.append(ViewerRun(key=key, dir=resolved, store=store, track=track,
                              tasks={str(getattr(t, "id", "")): t for t in store.all_tasks()}, views=views_of(track)))
    if not runs:
        raise UserError("give at least one run directory: deskbench view RUNDIR")
    return runs


class EpisodeRow(BaseModel):
    """One line of the episodes table."""

    run: str
    track: str
    system: str
    task_id: str
    attempt: int
    status: str  # the episode's: ok / error / limit
    question: str
    outcome: Outcome
    score: float | None
    steps: int  # model calls
    tool_calls: int
    cost_usd: float | None
    hop_type: str | None
    error_class: str | None
    scored_by: str = ""  # the stored scoring that decided the outcome, or the offline scorer
    scoring: int | None = None  # that stored scoring's number (None: offline)

    @property
    def key(self) -> dict[str, str]:
        """The query that names this episode (/episode?...)."""
        return {"run": self.run, "system": self.system, "task": self.task_id, "attempt": str(self.attempt)}


class UnreadableRow(BaseModel):
    """A stored episode that cannot be read (runs/store.py UnreadableEpisode), as the run page
    marks it: which one and what is wrong, in one line."""

    run: str
    task_id: str
    system: str
    attempt: str  # as stored: it may be what is broken
    problem: str


def error_class(episode: Episode, score: EpisodeScore, run: ViewerRun) -> str | None:
    """The track's class of a wrong item, as the report counts it (docqa's MADQA H.3, where a
    failed episode is a refusal; analytics' error type), so the report's links find it; else a
    failed episode's category (diagnose: timeout, step_limit, model_error, ...)."""
    if score.error_class and score.outcome != "correct":
        return score.error_class
    if episode.status != "ok":
        return diagnose_episode(episode, run.tasks.get(episode.task_id), run.track).category
    return None


def failure(episode: Episode, run: ViewerRun) -> str | None:
    """diagnose's category of a failed episode (what went wrong on the trajectory)."""
    if episode.status == "ok":
        return None
    return diagnose_episode(episode, run.tasks.get(episode.task_id), run.track).category


def _agent_of(run: ViewerRun, system: str) -> tuple[str, bool | None]:
    """The system's agent, and whether it is one of its track's built-ins (None: not known). The
    run's identity meta names the agent; a system run before identity was kept is matched by
    its name (`agent:model`, `agent[tags]:model`) against the track's built-in agents."""
    from deskbench.contract.registry import get_track
    from deskbench.runs.identity import stored_identities

    try:
        builtins = set(get_track(run.track).agents)
    except UserError:
        builtins = set()
    known = stored_identities(run.store).get(system)
    if known is not None:
        return known.config.agent, known.config.agent in builtins
    agent = next((a for a in builtins if system == a or system.startswith((f"{a}:", f"{a}["))), None)
    return (agent, True) if agent is not None else (system, None)


def why_no_model_calls(run: ViewerRun, episode: Episode, doc: TranscriptDoc | None) -> str | None:
    """Why the episode page shows no model call, in words (None: its transcript holds some).
    Every agent's calls are recorded, a plugin's too (agents/plugin_calls.py), so what is left
    is: an import, a person, an older deskbench, an agent that called no model, an error first."""
    if doc is not None and any(isinstance(e, ModelCallEvent) for e in doc.events):
        return None
    counted = max(sum(isinstance(s, ModelCallStep) for s in episode.trajectory), episode.usage.calls)
    known = run.views.no_model_calls(run.store, episode)  # the track's: a person, an import
    if known is not None:
        return known
    agent, builtin = _agent_of(run, episode.system)
    ended = episode.status != "error"
    if doc is None and builtin is not False and counted:
        return (f"No transcript: this episode was stored by an older deskbench, before transcripts were kept; "
                f"its {counted} model call(s) are counted in its steps and usage, their text was not kept.")
    if doc is None and builtin is False and (counted or ended):  # today such an episode has a transcript
        said = f"; it reported {counted} model call(s) itself" if counted else ""
        return (f"No transcript: {agent} is a plugin agent, and this episode was stored by an older deskbench, "
                f"which did not record the calls a plugin makes through ctx.model{said}.")
    if doc is None and builtin is None and ended:
        return "No transcript: this episode was stored by an older deskbench, which kept none for it."
    if episode.status == "error":
        if doc is not None:
            return "No model calls: the episode failed (the error is above) before its first model call."
        return ("No transcript: the episode failed (the error is above) before the agent handed back a record "
                "of its calls.")
    return (f"No model calls: {agent} made none in this episode (an agent that calls no model, such as lexical, "
            "or one that answered without calling it).")


class Catalog:
    """Every episode of the runs with its score. A system's scores are computed once and kept
    until something they are computed from is written (an episode, a stored scoring, a grade:
    viewer_scores.stamp), so a run still going, a re-score or a new grade shows on the next load."""

    def __init__(self, runs: Sequence[ViewerRun]) -> None:
        self.runs = list(runs)
        self._scores: dict[tuple[str, str], tuple[tuple[object, ...], Scores, str]] = {}
        self._lock = threading.Lock()

    def run(self, key: str) -> ViewerRun | None:
        return next((r for r in self.runs if r.key == key), None)

    def scores(self, run: ViewerRun, system: str, stamp: tuple[object, ...] | None = None) -> tuple[Scores, str]:
        """`stamp`: the run's stamp when the caller has it (one query per table, not per row)."""
        now = stamp if stamp is not None else run_stamp(run.store)
        with self._lock:  # one scoring per system at a time: the scorers open event loops
            cached = self._scores.get((run.key, system))
            if cached is None or cached[0] != now:
                scores, problem = system_scores(run.store, system)
                cached = (now, scores, problem)
                self._scores[(run.key, system)] = cached
        return cached[1], cached[2]

    def score(self, run: ViewerRun, episode: Episode, stamp: tuple[object, ...] | None = None) -> EpisodeScore:
        scores, problem = self.scores(run, episode.system, stamp)
        found = scores.get((episode.task_id, episode.attempt))
        return found if found is not None else EpisodeScore(why_unscored=problem or "the scorer did not score it")

    def episode_score(self, run: ViewerRun, episode: Episode) -> EpisodeScore:
        """The score an episode's page shows: with the figures its track reads off the episode
        itself (ViewerViews.episode_metrics), which the table does not need."""
        shown = self.score(run, episode)
        extra = run.views.episode_metrics(run.tasks.get(episode.task_id), episode)
        return shown.model_copy(update={"metrics": {**shown.metrics, **extra}}) if extra else shown

    def row(self, run: ViewerRun, episode: Episode, stamp: tuple[object, ...] | None = None) -> EpisodeRow:
        score = self.score(run, episode, stamp)
        task = task_view(run.tasks.get(episode.task_id), run.views)
        return EpisodeRow(
            run=run.key, track=run.track, system=episode.system, task_id=episode.task_id, attempt=episode.attempt,
            status=episode.status, question=task.question, outcome=score.outcome, score=score.score,
            steps=sum(isinstance(s, ModelCallStep) for s in episode.trajectory),
            tool_calls=sum(isinstance(s, ToolCallStep) for s in episode.trajectory),
            cost_usd=episode.usage.cost_usd, hop_type=task.hop_type, error_class=error_class(episode, score, run),
            scored_by=score.source, scoring=score.scoring)

    def rows(self) -> list[EpisodeRow]:
        return self.table_rows()[0]

    def table_rows(self) -> tuple[list[EpisodeRow], list[UnreadableRow]]:
        """Every episode's row, and a marked row for each stored episode that cannot be read (the
        run page shows both: one bad row never hides the others)."""
        out: list[EpisodeRow] = []
        marked: list[UnreadableRow] = []
        for run in self.runs:
            now = run_stamp(run.store)
            for ep in run.store.episode_rows():
                if isinstance(ep, Episode):
                    out.append(self.row(run, ep, now))
                else:
                    marked.append(UnreadableRow(run=run.key, task_id=ep.task_id, system=ep.system,
                                                attempt=ep.attempt, problem=ep.problem))
        return out, marked

    def episode(self, run_key: str, system: str, task_id: str, attempt: int) -> tuple[ViewerRun, Episode] | None:
        run = self.run(run_key)
        if run is None:
            return None
        found = next((e for e in run.store.episodes(system) if e.task_id == task_id and e.attempt == attempt), None)
        return (run, found) if found is not None else None

    def unreadable_episode(self, run_key: str, system: str, task_id: str, attempt: int) -> UnreadableEpisode | None:
        """The stored episode of that key when its row cannot be read (its page says so)."""
        run = self.run(run_key)
        return None if run is None else next(
            (u for u in run.store.unreadable(system) if u.task_id == task_id and u.attempt == str(attempt)), None)

    def episodes_of_task(self, task_id: str) -> list[tuple[ViewerRun, Episode]]:
        """Every episode of one task, over all runs (the compare page's choices)."""
        return [(run, e) for run in self.runs for e in run.store.episodes() if e.task_id == task_id]


# -- the table's filters and sorting (query parameters: the page works without JavaScript) ------

SORTS: dict[str, Callable[[EpisodeRow], Any]] = {
    "run": lambda r: r.run, "system": lambda r: r.system, "task": lambda r: r.task_id,
    "attempt": lambda r: r.attempt, "outcome": lambda r: r.outcome,
    "score": lambda r: (r.score is None, r.score or 0.0), "steps": lambda r: r.steps,
    "tools": lambda r: r.tool_calls, "cost": lambda r: (r.cost_usd is None, r.cost_usd or 0.0),
    "hop": lambda r: r.hop_type or "", "error": lambda r: r.error_class or "",
    "scoring": lambda r: (r.scoring is None, r.scoring or 0),
}
OUTCOMES = ("correct", "wrong", "unscored")


class TableQuery(BaseModel):
    """The table's state, as the query string carries it; bad values are ignored, not errors
    (a stale link still shows the table)."""

    system: str = ""
    outcome: str = ""
    q: str = ""
    error: str = ""
    run: str = ""
    task: str = ""
    sort: str = "task"
    desc: bool = False
    page: int = 1

    @classmethod
    def of(cls, params: dict[str, str]) -> TableQuery:
        sort = params.get("sort", "task")
        page = parse_number(params.get("page", "1"), low=1) or 1
        return cls(system=params.get("system", ""), outcome=params.get("outcome", "") if params.get("outcome") in OUTCOMES else "",
                   q=params.get("q", "").strip()[:200], error=params.get("error", ""), run=params.get("run", ""),
                   task=params.get("task", ""), sort=sort if sort in SORTS else "task",
                   desc=params.get("desc") == "1", page=page)

    def keep(self, row: EpisodeRow) -> bool:
        needle = self.q.lower()
        return ((not self.system or row.system == self.system) and (not self.outcome or row.outcome == self.outcome)
                and (not self.error or row.error_class == self.error) and (not self.run or row.run == self.run)
                and (not self.task or row.task_id == self.task)
                and (not needle or needle in row.task_id.lower() or needle in row.question.lower()))

    def apply(self, rows: Sequence[EpisodeRow]) -> list[EpisodeRow]:
        kept = [r for r in rows if self.keep(r)]
        by = SORTS[self.sort]
        return sorted(kept, key=lambda r: (by(r), r.run, r.system, r.task_id, r.attempt), reverse=self.desc)

    def params(self, **change: object) -> dict[str, str]:
        """The query string of this state with `change` applied (links keep the other filters)."""
        state = {**self.model_dump(), **change}
        out = {k: str(v) for k, v in state.items() if v not in ("", None, False) and k != "page"}
        if state.get("desc"):
            out["desc"] = "1"
        if state.get("page", 1) != 1:
            out["page"] = str(state["page"])
        if out.get("sort") == "task":
            out.pop("sort")
        return out


def pretty(value: object) -> str:
    """A JSON value as indented text (the page shows it in <pre>, escaped)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return str(value)
