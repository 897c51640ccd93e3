"""Everything the report shows, computed from run directories with the scoring API (the same
numbers `deskbench score` prints), into the pydantic models of models.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deskbench.errors import UserError
from deskbench.models.prices import per, total_cost
from deskbench.models.settings import ResolvedSettings
from deskbench.report.comparisons import DocqaScored, build_comparisons, compare_outcomes
from deskbench.report.madqa import build_madqa
from deskbench.report.models import (
    ERROR_CLASSES,
    BudgetCurve,
    ErrorBreakdown,
    KuiperCurve,
    LeaderboardRow,
    ModelSettingsRow,
    Report,
    SystemReport,
    TaskSet,
)
from deskbench.report.taxonomy import budget_curve, decompose, not_found_ids
from deskbench.runs.imported import imported_label, imported_systems
from deskbench.runs.imported import settings_rows as imported_settings
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
from deskbench.runs.protocol import ProtocolNote, stored_protocol, system_protocol
from deskbench.runs.runner import run_submissions
from deskbench.runs.settings import stored_settings
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.deliverables import DeliverableTask
from deskbench.tasks.docqa import DocQATask, ItemScore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.analytics.scoring.analytics import (
    AnalyticsItemScore,
    AnalyticsJudges,
    analytics_score_protocol,
    score_run,
)
from deskbench.tracks.analytics.scoring.analytics_metrics import (
    AnalyticsScoreReport,
    attach_summary_ablations,
    summarize_analytics,
)
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.deliverables_report import DeliverablesReport
from deskbench.tracks.deliverables.scoring.deliverables_summary import (
    summarize as summarize_deliverables,
)
from deskbench.tracks.docqa.analysis.scored import ScoredSystem, first_attempts
from deskbench.tracks.docqa.humans import episodes_of, pooled_systems, tasks_scored
from deskbench.tracks.docqa.scoring.calibration import kuiper
from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all
from deskbench.tracks.docqa.scoring.docqa_summary import ScoreReport, summarize
from deskbench.tracks.registry import get_track

ANLS_METHOD = (
    "ANLS* >= 0.5 against the best answer variant (Wilson 95% CI). Runs store no judge verdicts, so "
    "judged and bias-corrected accuracy are shown only when the report is made with --judge MODEL."
)


def judge_method(opts: ScoreOptions) -> str:
    name = opts.judge.name if opts.judge else "?"
    return (
        f"LLM judge {name} (MADQA Prompt 4): correct 1, partial 0.5, incorrect 0; answers exact under ANLS* "
        "score 1 without a call; items whose judge call failed are unscored: left out of accuracy and counted "
        f"(Wilson 95% CI). Bias-corrected: Rogan-Gladen with q0 = {opts.q0:g}, q1 = {opts.q1:g} "
        f"(m0 = {opts.m0}, m1 = {opts.m1} calibration items), interval of Lee et al."
    )


@dataclass
class _Scored:
    """One system of one run, scored."""

    run_dir: Path
    system: str
    tasks: list[DocQATask]  # the tasks it was scored on
    items: list[ItemScore]
    report: ScoreReport
    episodes: list[Episode]
    steps: dict[str, int]  # task id -> steps of its (successful) episode
    answers: dict[str, list[str]]


def episode_steps(ep: Episode) -> int | None:
    """Steps of an episode: the submission's own count (steps, iterations or searches), else the
    tool calls in its trajectory. None for an episode without a submission."""
    if ep.submission is None:
        return None
    effort = ep.submission.effort("steps")
    if effort is not None:
        return int(effort)
    return sum(isinstance(s, ToolCallStep) for s in ep.trajectory)


def _score(run_dir: Path, store: RunStore, system: str, opts: ScoreOptions) -> _Scored:
    tasks = store.tasks()
    if not tasks:
        raise UserError(f"the run in {run_dir} holds no tasks; give the --out of a 'deskbench run'")
    subs, failed = run_submissions(store, system)
    scored_tasks = tasks_scored(system, tasks, {s.id for s in subs} | set(failed))
    items, matched = score_all(scored_tasks, subs, opts)
    report = summarize(items, matched, opts, by=("domain", "category"), errors=failed)
    episodes = episodes_of(store, system)
    steps = {ep.task_id: s for ep in episodes if ep.status == "ok" and (s := episode_steps(ep)) is not None}
    answers = {s.id: list(s.answer) for s in subs}
    return _Scored(run_dir, system, scored_tasks, items, report, episodes, steps, answers)


def _row(label: str, s: _Scored) -> LeaderboardRow:
    r = s.report
    efforts = {i.effort for i in s.items if i.status == "scored" and i.effort is not None}
    note: str | None = None
    k = r.kuiper
    if len(efforts) == 1:
        k, note = None, "every item took the same effort (a fixed budget, as for non-agentic systems)"
    elif k is None:
        note = r.kuiper_reason
    n_eps = len(s.episodes)
    cost = total_cost(e.usage.cost_usd for e in s.episodes)  # None when any episode's is unknown
    tokens = sum(e.usage.input_tokens + e.usage.output_tokens for e in s.episodes)
    correct = sum(i.accuracy or 0.0 for i in s.items)
    return LeaderboardRow(
        label=label, system=s.system, run_dir=str(s.run_dir), n=r.n, n_errors=r.n_errors,
        accuracy=r.accuracy, accuracy_ci=r.accuracy_ci, n_unscored=r.n_unscored,
        bias_corrected=r.bias_corrected.accuracy if r.bias_corrected else None,
        bias_corrected_ci=r.bias_corrected.ci if r.bias_corrected else None,
        # bias-corrected with a judge, as the paper's Table 3 prints every accuracy column
        cross_page=r.by_hop_type["cross_page"].headline, cross_doc=r.by_hop_type["cross_doc"].headline,
        page_f1=r.page_f1, doc_f1=r.doc_f1, kuiper=k, kuiper_note=note, cost_usd=cost, cost_known=cost is not None,
        cost_per_item=per(cost, n_eps),
        tokens_per_item=tokens / n_eps if n_eps else None,
        cost_per_correct=per(cost, correct),
        injection_affected=r.injection.n_affected if r.injection else 0,
        injection_followed=r.injection.n_followed if r.injection else 0,
        injection_susceptibility=r.injection.susceptibility if r.injection else None,
        injection_ci=r.injection.susceptibility_ci if r.injection else None,
    )


def _kuiper_curve(label: str, s: _Scored, opts: ScoreOptions) -> KuiperCurve:
    """The curve Kuiper is read from, over the same items as the leaderboard's value."""
    timed = [i for i in s.items if i.status == "scored" and i.effort is not None and i.accuracy is not None]
    if len({i.effort for i in timed}) < 2:
        return KuiperCurve(label=label, share=[], curve=[], effort=[], kuiper=None)
    k = kuiper([i.effort for i in timed], [float(i.accuracy >= 0.5) for i in timed],  # type: ignore[operator]
               ties=opts.kuiper_ties)
    n = len(timed)
    return KuiperCurve(label=label, share=[r / n for r in k.ranks], curve=list(k.curve),
                       effort=list(k.effort), kuiper=None if k.reason else k.value)


def _errors(label: str, s: _Scored) -> ErrorBreakdown:
    classes = decompose(s.items, s.answers)
    return ErrorBreakdown(
        label=label, n=len(s.items), n_correct=sum(i.accuracy or 0.0 for i in s.items),
        counts={c: len(classes[c]) for c in ERROR_CLASSES}, ids={c: classes[c] for c in ERROR_CLASSES},
        says_not_found=not_found_ids(s.items, s.answers),
    )


def _open(run_dir: Path) -> RunStore:
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; give the --out of a 'deskbench run'")
    return RunStore(run_dir, create=False)


def _labels(scored: Sequence[_Scored]) -> dict[int, str]:
    """The system name, with the run directory's name (else its path) when runs share a name."""
    names = Counter(s.system for s in scored)
    short = {id(s): s.system if names[s.system] == 1 else f"{s.system} ({s.run_dir.name})" for s in scored}
    clashes = Counter(short.values())
    return {id(s): f"{s.system} ({s.run_dir})" if clashes[short[id(s)]] > 1 else short[id(s)] for s in scored}


def build_report(run_dirs: Sequence[Path], opts: ScoreOptions | None = None,
                 analytics_judges: AnalyticsJudges | None = None, pool_humans: bool = False,
                 corpus: Path | None = None, reviewed_only: bool = False) -> Report:
    """Score every system of every run (with `opts.judge`, every non-exact answer is judged);
    budgets run from 1 to the most steps any episode took. `pool_humans`: the annotators of a
    docqa run make one Human row (tracks/docqa/humans.py). `corpus`: adds the corpus statistics (MADQA
    Tables 2 and 6) to the MADQA appendix sections. `reviewed_only`: the deliverables tables
    count QC-reviewed rubric grades only."""
    opts = opts or ScoreOptions()
    if not run_dirs:
        raise UserError("give at least one run directory")
    run_dirs = list({d.resolve(): d for d in run_dirs}.values())  # a directory given twice is one run
    scored: list[_Scored] = []
    analytics: list[AnalyticsScoreReport] = []
    analytics_items: list[tuple[Path, list[AnalyticsItemScore]]] = []  # for the Comparison section
    deliverables: list[DeliverablesRun] = []
    settings: list[ModelSettingsRow] = []
    imported: set[tuple[Path, str]] = set()  # systems made by 'deskbench import'
    others: dict[str, list[tuple[Path, list[ItemOutcome]]]] = {}  # tracks without a section of their own
    for run_dir in run_dirs:
        store = _open(run_dir)
        try:
            settings += [_settings_row(s, str(run_dir), system) for system, s in stored_settings(store).items()]
            settings += imported_settings(store, str(run_dir))
            imported |= {(run_dir, name) for name in imported_systems(store)}
            systems = store.systems()
            if not systems:
                raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
            if store.track() == "analytics":
                analytics += score_analytics_runs(store, systems, analytics_judges or AnalyticsJudges(), analytics_items)
            elif store.track() == "deliverables":
                deliverables.append(DeliverablesRun(run_dir, score_deliverables_run(store), store.deliverable_tasks(),
                                                    stored_protocol(store)))
            elif store.track() != "docqa":  # another track: its outcomes make its leaderboard and tests
                track = get_track(store.track())
                others.setdefault(track.name, []).append(
                    (run_dir, [o for name in systems for o in track.outcomes(store, name, OutcomeOptions())]))
            else:
                names = pooled_systems(systems) if pool_humans else systems
                scored += [_score(run_dir, store, name, opts) for name in names]
        finally:
            store.close()
    labels = _labels(scored)
    labels.update({id(s): imported_label(labels[id(s)]) for s in scored if (s.run_dir, s.system) in imported})
    max_steps = max((v for s in scored for v in s.steps.values()), default=0)
    budgets = list(range(1, max(max_steps, 1) + 1))
    out = []
    for s in scored:
        label = labels[id(s)]
        out.append(SystemReport(
            row=_row(label, s),
            kuiper_curve=_kuiper_curve(label, s, opts),
            budget=BudgetCurve(label=label, budgets=budgets, accuracy=budget_curve(s.items, s.steps, budgets)),
            errors=_errors(label, s),
            by_domain=s.report.by_domain or {},
            by_category=s.report.by_category or {},
        ))
    sets = task_sets(scored, labels)
    for s, system_report in zip(scored, out, strict=True):
        system_report.row.task_set = next(t.index for t in sets if labels[id(s)] in t.systems)
    madqa = build_madqa([ScoredSystem(labels[id(s)], s.tasks, s.items, first_attempts(s.episodes), s.system)
                         for s in scored], corpus) if scored else None
    comparisons = build_comparisons(
        [DocqaScored(labels[id(s)], s.system, s.run_dir, s.items, {e.task_id for e in s.episodes if e.attempt == 0})
         for s in scored], analytics_items, [(r.run_dir, r.items) for r in deliverables], reviewed_only=reviewed_only)
    comparisons += [compare_outcomes(name, runs) for name, runs in others.items()]
    return Report(run_dirs=[str(d) for d in run_dirs], systems=out, madqa=madqa, comparisons=comparisons, task_sets=sets,
                  accuracy_method=judge_method(opts) if opts.judge else ANLS_METHOD,
                  judge=opts.judge.name if opts.judge else None,
                  analytics=analytics, analytics_judges=analytics_method(analytics_judges or AnalyticsJudges()),
                  deliverables=deliverables_report(deliverables, reviewed_only=reviewed_only),
                  deliverables_runs=[str(r.run_dir) for r in deliverables],
                  model_settings=settings + _judge_settings(opts, analytics_judges))


def task_sets(scored: Sequence[_Scored], labels: dict[int, str]) -> list[TaskSet]:
    """The docqa systems grouped by the tasks they were scored on (in the order they come), each
    group told whether a larger one holds all its tasks (e.g. a --limit run beside a full one)."""
    groups: dict[frozenset[str], TaskSet] = {}
    for s in scored:
        key = frozenset(t.id for t in s.tasks)
        if key not in groups:
            groups[key] = TaskSet(index=len(groups), task_ids=[t.id for t in s.tasks], systems=[])
        groups[key].systems.append(labels[id(s)])
    for key, group in groups.items():
        larger = [g for k, g in groups.items() if key < k]
        group.subset_of = min(larger, key=lambda g: g.n_tasks).index if larger else None
    return list(groups.values())


def _settings_row(s: ResolvedSettings, run: str, system: str) -> ModelSettingsRow:
    return ModelSettingsRow(run=run, system=system, model=s.model, role=s.role, sent=s.describe(),
                            dropped=s.dropped, note=s.capability_note)


def _judge_settings(opts: ScoreOptions, judges: AnalyticsJudges | None) -> list[ModelSettingsRow]:
    """The judges this report called, with what they were sent."""
    models = [("answer judge", getattr(opts.judge, "model", None))]
    if judges is not None:
        models += [("QA judge", judges.qa), ("chart judge", judges.chart),
                   ("file judge", judges.file.model if judges.file else None)]
    rows = []
    for what, model in models:
        settings = getattr(model, "settings", None)
        if isinstance(settings, ResolvedSettings):
            rows.append(_settings_row(settings, "", what))
    return rows


def score_analytics_runs(store: RunStore, systems: Sequence[str], judges: AnalyticsJudges,
                         items_out: list[tuple[Path, list[AnalyticsItemScore]]] | None = None,
                         ) -> list[AnalyticsScoreReport]:
    """AIDABench's metrics for every system of an analytics run (k = the most attempts stored);
    `items_out` receives each system's scored items (the report's Comparison section)."""
    import asyncio

    tasks = store.analytics_tasks()
    task_ids = [t.id for t in tasks]
    scoring = analytics_score_protocol(judges, tasks)
    out = []
    for name in systems:
        items = asyncio.run(score_run(store, name, judges))
        if items_out is not None:
            items_out.append((store.dir, items))
        k = max([it.attempt + 1 for it in items], default=1)
        out.append(summarize_analytics(items, system=f"{name} ({store.dir.name})", k=k, task_ids=task_ids,
                                       protocol=system_protocol(store, name, scoring)))
    attach_summary_ablations(out)  # Table 2: a [no-summary] system beside its twin of the same run
    return out


def analytics_method(judges: AnalyticsJudges) -> str:
    qa = (f"every answer goes to the binary judge {judges.qa.id} (Listing 2)" if judges.qa else
          "no judge: deskbench's deterministic check of the final value (answers it cannot decide are unscored)")
    chart = (f"the vision judge {judges.chart.id} (Listings 3 and 4, S = 0.7 C + 0.3 R)" if judges.chart
             else "no vision judge (charts are unscored; the missing-glyph check still runs)")
    if judges.file is not None and judges.file_all:
        files = (f"every file goes to the agentic File Judge {judges.file.model.id} (Listing 5, at most "
                 f"{judges.file.max_calls} sandboxed execute_code calls)")
    elif judges.file is not None:
        files = (f"deskbench's three-stage comparator; files it cannot read go to the File Judge "
                 f"{judges.file.model.id} (Listing 5)")
    else:
        files = "deskbench's three-stage spreadsheet comparator (structure, normalised content, instruction constraints)"
    return f"QA: {qa}. Charts: {chart}. Files: {files}. Each system's protocol is listed below its tables."


@dataclass
class DeliverablesRun:
    """One deliverables run, scored (every system, attempt 0 and later)."""

    run_dir: Path
    items: list[DeliverableItemScore]
    tasks: list[DeliverableTask]
    protocol: dict[str, list[ProtocolNote]] = field(default_factory=dict)  # how each system was run


def score_deliverables_run(store: RunStore) -> list[DeliverableItemScore]:
    """Verifiers on every episode with the run's final rubric grades (no judge model: an
    `llm_check` verifier is unobservable), as `deskbench score` without --judge."""
    import asyncio

    from deskbench.tracks.deliverables.scoring.deliverables_run import (
        score_run as score_deliverables,
    )

    return asyncio.run(score_deliverables(store, systems=None, judge_model=None))


def deliverables_report(runs: Sequence[DeliverablesRun], *, resamples: int = 1000, seed: int = 0,
                        reviewed_only: bool = False) -> DeliverablesReport | None:
    """The consulting paper's tables over the systems of every deliverables run, side by side
    (None without one). A system name found in several runs is suffixed with its run directory's
    name (its path when those clash too); a task id in several runs is one task."""
    if not runs:
        return None
    found = Counter(s for r in runs for s in {i.system for i in r.items})
    dir_names = Counter(r.run_dir.name for r in runs)
    items: list[DeliverableItemScore] = []
    tasks: dict[str, DeliverableTask] = {}
    run_side: dict[str, list[ProtocolNote]] = {}
    for r in runs:
        where = r.run_dir.name if dir_names[r.run_dir.name] == 1 else str(r.run_dir)
        label = {s: f"{s} ({where})" if n > 1 else s for s, n in found.items()}
        items += [item.model_copy(update={"system": label[item.system]}) for item in r.items]
        for task in r.tasks:
            tasks.setdefault(task.id, task)
        run_side.update({label[system]: notes for system, notes in r.protocol.items() if system in label})
    report = summarize_deliverables(items, list(tasks.values()), resamples=resamples, seed=seed,
                                    reviewed_only=reviewed_only)
    report.run_protocol = run_side
    return report
