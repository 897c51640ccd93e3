"""AIDABench's dataset statistics (§3.1.2) over analytics task sets (`deskbench analyse task-stats`),
and Appendix H's tokens and rounds per task type over scored runs (the report's Figures 6-7).

What the paper reports for its 603 tasks, and how each is counted here:
- categories: QA 37.5%, data visualization 19.2%, file generation 43.3% (shares of tasks);
- input formats: "tabular files dominate the distribution (xlsx/csv: 91.8%)". The paper does not
  say whether it counts files or tasks; deskbench counts input files (each input of each task
  once), by extension, and calls xlsx, xlsm, xls and csv tabular;
- cross-file tasks: 27.4% have several input files, 16.6% exactly two, 10.8% three or more, at
  most 14 files (shares of tasks);
- difficulty by expert steps: easy (<= 6) 29.5%, medium (7-12) 49.4%, hard (>= 13) 21.1%. The
  release carries no step counts (tracks/analytics/aida.py): when every task has the same count
  (the one --difficulty-steps gave), `difficulty_uniform` says the split measures nothing.

Several tasks files are counted together (the release's split manifests are imported one file
each, `deskbench fetch aida`); a task is counted once per file it is in.

Appendix H (Figures 6-7): per system, the average tokens and interaction rounds per task in each
scenario (QA, data visualization, file generation) and overall, "avg@3 statistics" (§4.1): here
avg@k, the mean over a task's attempts, then over the tasks of the group (with every attempt
there, the mean over episodes). Tokens are output (completion) tokens: the paper does not say
which, and its per-task range (2.2k-13.2k over up to 20 rounds) is far below what the resent
history costs in input tokens; input tokens are kept beside them in the table. Rounds are
execute_code calls (AnalyticsSubmission.rounds). Episodes that ended in an error (a provider or
harness failure, not the agent's work) are left out and counted; round-limit episodes count.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from deskbench.tracks.analytics.tasks import CATEGORIES, AnalyticsTask, read_tasks

if TYPE_CHECKING:
    from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore

TABULAR = frozenset({"xlsx", "xlsm", "xls", "csv"})
DIFFICULTIES = ("easy", "medium", "hard")
# §3.1.2, in percent, for the side-by-side columns
PAPER: dict[str, float] = {
    "tasks": 603, "qa": 37.5, "visualization": 19.2, "file_generation": 43.3, "tabular": 91.8,
    "cross_file": 27.4, "two_files": 16.6, "three_or_more_files": 10.8, "max_files": 14,
    "easy": 29.5, "medium": 49.4, "hard": 21.1,
}


class Share(BaseModel):
    count: int
    share: float | None  # count / the total it is a share of (None when that total is 0)
    paper: float | None = None  # the paper's percentage (§3.1.2), where it gives one


class TaskStats(BaseModel):
    """§3.1.2 of one task set (JSON: `analyse task-stats --output`)."""

    files: list[str]
    tasks: int
    paper_tasks: int = int(PAPER["tasks"])
    categories: dict[str, Share]
    input_files: int
    formats: dict[str, Share]  # extension -> share of input files ("(none)" for a name without one)
    tabular: Share  # xlsx/xlsm/xls/csv among input files
    cross_file: Share  # tasks with two or more input files
    two_files: Share
    three_or_more_files: Share
    max_files: int
    paper_max_files: int = int(PAPER["max_files"])
    difficulty: dict[str, Share]
    difficulty_uniform: bool  # every task has the same step count: the split says nothing
    note: str = Field(default="input formats are counted per input file (the paper does not say files or tasks)")


def _share(count: int, total: int, paper: str | None = None) -> Share:
    return Share(count=count, share=count / total if total else None, paper=PAPER[paper] if paper else None)


def _extension(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower().lstrip(".")
    return suffix or "(none)"


def task_stats(tasks: Sequence[AnalyticsTask], files: Sequence[str] = ()) -> TaskStats:
    """The statistics of `tasks` (see the module's docstring)."""
    n = len(tasks)
    cats = Counter(t.category for t in tasks)
    exts = Counter(_extension(p) for t in tasks for p in t.inputs)
    n_inputs = sum(exts.values())
    counts = [len(t.inputs) for t in tasks]
    levels: Counter[str] = Counter(t.difficulty for t in tasks)
    return TaskStats(
        files=list(files), tasks=n,
        categories={c: _share(cats.get(c, 0), n, c) for c in CATEGORIES},
        input_files=n_inputs,
        formats={e: _share(k, n_inputs) for e, k in sorted(exts.items(), key=lambda kv: (-kv[1], kv[0]))},
        tabular=_share(sum(k for e, k in exts.items() if e in TABULAR), n_inputs, "tabular"),
        cross_file=_share(sum(c >= 2 for c in counts), n, "cross_file"),
        two_files=_share(sum(c == 2 for c in counts), n, "two_files"),
        three_or_more_files=_share(sum(c >= 3 for c in counts), n, "three_or_more_files"),
        max_files=max(counts, default=0),
        difficulty={d: _share(levels.get(d, 0), n, d) for d in DIFFICULTIES},
        difficulty_uniform=n > 1 and len({t.difficulty_steps for t in tasks}) == 1,
    )


def task_stats_of_files(paths: Sequence[Path]) -> TaskStats:
    """The statistics of every task in the files, counted together."""
    tasks = [t for p in paths for t in read_tasks(p).items]
    return task_stats(tasks, [str(p) for p in paths])


def stats_rows(s: TaskStats) -> list[tuple[str, str, str]]:
    """(what, this task set, the paper) rows, as `analyse task-stats` prints them."""
    def pct(x: Share) -> str:
        return "–" if x.share is None else f"{100 * x.share:.1f}% ({x.count})"

    def paper(x: Share) -> str:
        return "" if x.paper is None else f"{x.paper:.1f}%"

    rows = [("tasks", str(s.tasks), str(s.paper_tasks))]
    rows += [(f"category {c}", pct(x), paper(x)) for c, x in s.categories.items()]
    rows += [("input files", str(s.input_files), ""), ("tabular inputs (xlsx/csv)", pct(s.tabular), paper(s.tabular))]
    rows += [(f"  format {e}", pct(x), "") for e, x in s.formats.items()]
    rows += [("cross-file tasks (2+ inputs)", pct(s.cross_file), paper(s.cross_file)),
             ("  exactly 2 inputs", pct(s.two_files), paper(s.two_files)),
             ("  3 or more inputs", pct(s.three_or_more_files), paper(s.three_or_more_files)),
             ("most inputs in one task", str(s.max_files), str(s.paper_max_files))]
    note = " (all tasks have one step count)" if s.difficulty_uniform else ""
    rows += [(f"difficulty {d}{note}", pct(x), paper(x)) for d, x in s.difficulty.items()]
    return rows


def stats_png(s: TaskStats) -> bytes:
    """The shares beside the paper's, one panel a statistic (categories, inputs, difficulty)."""
    from deskbench.analysis.plotting import pyplot
    from deskbench.report.plots import png

    panels: list[tuple[str, list[tuple[str, Share]]]] = [
        ("categories", [(c, x) for c, x in s.categories.items()]),
        ("inputs", [("tabular", s.tabular), ("2+ files", s.cross_file), ("2 files", s.two_files),
                    ("3+ files", s.three_or_more_files)]),
        ("difficulty", [(d, x) for d, x in s.difficulty.items()]),
    ]
    fig, axes = pyplot().subplots(1, 3, figsize=(11, 3.4))
    for ax, (title, items) in zip(axes, panels, strict=True):
        xs = range(len(items))
        ax.bar([x - 0.2 for x in xs], [100 * (sh.share or 0) for _, sh in items], 0.4, label="this task set")
        ax.bar([x + 0.2 for x in xs], [sh.paper or 0 for _, sh in items], 0.4, label="paper (§3.1.2)", alpha=0.6)
        ax.set_xticks(list(xs), [name.replace("_", " ") for name, _ in items], fontsize=8, rotation=15)
        ax.set_ylim(0, 100)
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("share (%)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return png(fig)


# -- Appendix H: tokens and rounds per task type ------------------------------------------------

EffortMeasure = Literal["output_tokens", "input_tokens", "rounds"]
SCENARIO_TITLES = {"qa": "QA", "visualization": "Data Visualization", "file_generation": "File Generation"}


class Effort(BaseModel):
    """avg@k of one group of tasks: the mean over each task's attempts, then over the tasks."""

    tasks: int
    episodes: int
    output_tokens: float | None
    input_tokens: float | None
    rounds: float | None


class SystemEffort(BaseModel):
    """Appendix H for one system: overall and per scenario."""

    system: str
    k: int
    overall: Effort
    by_category: dict[str, Effort]
    errors_left_out: int = 0  # episodes that ended in an error


def _avg_at_k(items: Sequence[AnalyticsItemScore], measure: EffortMeasure) -> float | None:
    per_task: dict[str, list[float]] = defaultdict(list)
    for it in items:
        per_task[it.task_id].append(float(getattr(it, measure)))
    means = [sum(v) / len(v) for v in per_task.values()]
    return sum(means) / len(means) if means else None


def _effort(items: Sequence[AnalyticsItemScore]) -> Effort:
    return Effort(tasks=len({it.task_id for it in items}), episodes=len(items),
                  output_tokens=_avg_at_k(items, "output_tokens"), input_tokens=_avg_at_k(items, "input_tokens"),
                  rounds=_avg_at_k(items, "rounds"))


def system_effort(items: Sequence[AnalyticsItemScore], *, system: str, k: int) -> SystemEffort:
    """Appendix H's numbers of one system's scored episodes (see the module's docstring)."""
    kept = [it for it in items if it.episode_status != "error"]
    return SystemEffort(system=system, k=k, overall=_effort(kept),
                        by_category={c: _effort([it for it in kept if it.category == c])
                                     for c in CATEGORIES if any(it.category == c for it in kept)},
                        errors_left_out=len(items) - len(kept))


def by_consumption(efforts: Sequence[SystemEffort], measure: EffortMeasure) -> list[SystemEffort]:
    """The systems sorted by their overall consumption, descending (as Figures 6-7 order models)."""
    return sorted(efforts, key=lambda e: -(getattr(e.overall, measure) or 0.0))


def effort_png(efforts: Sequence[SystemEffort], measure: EffortMeasure) -> bytes:
    """Figure 6 (tokens) or 7 (rounds): per system, bars for each scenario's average and a line for
    the overall average, systems by overall consumption, descending."""
    import textwrap

    from deskbench.analysis.plotting import pyplot
    from deskbench.report.plots import png

    ordered = by_consumption(efforts, measure)
    fig, ax = pyplot().subplots(figsize=(max(6.0, 1.1 * len(ordered) + 2), 4))
    width = 0.8 / len(CATEGORIES)
    xs = list(range(len(ordered)))
    for i, cat in enumerate(CATEGORIES):
        heights = [(getattr(e.by_category[cat], measure) or 0.0) if cat in e.by_category else 0.0 for e in ordered]
        ax.bar([x + (i - 1) * width for x in xs], heights, width, label=SCENARIO_TITLES[cat])
    ax.plot(xs, [getattr(e.overall, measure) or 0.0 for e in ordered], marker="o", color="black", label="overall")
    ax.set_xticks(xs, [textwrap.fill(e.system, 22) for e in ordered], fontsize=7, rotation=20, ha="right")
    ax.set_ylabel("output tokens per task" if measure == "output_tokens" else
                  "input tokens per task" if measure == "input_tokens" else "rounds per task")
    ax.set_title("Token consumption (AIDABench Fig. 6)" if measure.endswith("tokens") else
                 "Round consumption (AIDABench Fig. 7)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png(fig)
