"""docqa's section of `deskbench report` (`Track.report_section`): every system of its runs scored
with the scoring API (the numbers `deskbench score` prints, with the report's judge when given),
into report_models.py; its template is report.html.j2 beside this module."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from deskbench.errors import UserError
from deskbench.models.prices import per, total_cost
from deskbench.report.comparisons import compare_several, lone_reliability
from deskbench.report.models import ReportSection
from deskbench.report.sections import judge_settings
from deskbench.runs.imported import imported_label, imported_systems
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.analysis.judged import Judging
from deskbench.tracks.docqa.analysis.modality import modality_groups, stored_categories
from deskbench.tracks.docqa.analysis.scored import CORRECT_AT, ScoredSystem, first_attempts
from deskbench.tracks.docqa.episodes import run_submissions
from deskbench.tracks.docqa.humans import episodes_of, pooled_systems, tasks_scored
from deskbench.tracks.docqa.report_curves import BudgetCurve, ErrorBreakdown, KuiperCurve
from deskbench.tracks.docqa.report_madqa import build_madqa
from deskbench.tracks.docqa.report_models import (
    DocqaSection,
    LeaderboardRow,
    SystemReport,
    TaskSet,
)
from deskbench.tracks.docqa.scoring.calibration import kuiper
from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all
from deskbench.tracks.docqa.scoring.docqa_summary import ScoreReport, summarize
from deskbench.tracks.docqa.scoring.oracle_gap import HumanOracleGap, OracleGap
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, ItemScore
from deskbench.tracks.docqa.taxonomy import ERROR_CLASSES, budget_curve, decompose, not_found_ids

TEMPLATE = "deskbench.tracks.docqa:report.html.j2"

ANLS_METHOD = (
    "ANLS* >= 0.5 against the best answer variant (Wilson 95% CI). Judged and bias-corrected accuracy "
    "are shown when the report is made with --judge MODEL: the verdicts a 'deskbench score --judge MODEL' "
    "stored with the run are read back, and the judge is asked only for answers none of them judged."
)


def judge_method(opts: ScoreOptions, judging: Judging | None = None) -> str:
    name = opts.judge.name if opts.judge else "?"
    reuse = ""
    if judging is not None:  # where the verdicts came from (analysis/judged.py: stored ones reused)
        where = f" ({', '.join(judging.scorings)})" if judging.scorings else ""
        reuse = (f" Verdicts: {judging.reused} read from the runs' stored scorings with this judge{where}, "
                 f"{judging.asked} asked now.")
    return (
        f"LLM judge {name} (MADQA Prompt 4): correct 1, partial 0.5, incorrect 0; answers exact under ANLS* "
        "score 1 without a call; items whose judge call failed are unscored: left out of accuracy and counted "
        f"(Wilson 95% CI). Bias-corrected: Rogan-Gladen with q0 = {opts.q0:g}, q1 = {opts.q1:g} "
        f"(m0 = {opts.m0}, m1 = {opts.m1} calibration items), interval of Lee et al.{reuse}"
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
    tool calls in its trajectory. None for an episode without a (docqa) submission."""
    if not isinstance(ep.submission, DocQASubmission):
        return None
    effort = ep.submission.effort("steps")
    if effort is not None:
        return int(effort)
    return sum(isinstance(s, ToolCallStep) for s in ep.trajectory)


def _score(store: RunStore, system: str, opts: ScoreOptions, judging: Judging | None = None) -> _Scored:
    """One system scored; with `judging`, its stored verdicts by the report's judge are reused."""
    tasks = store.tasks_of(DocQATask)
    if not tasks:
        raise UserError(f"the run in {store.dir} holds no tasks; give the --out of a 'deskbench run'")
    subs, failed = run_submissions(store, system)
    # an id-less submission answers no task: it is left out of the answered ids and the answers
    scored_tasks = tasks_scored(system, tasks, {s.id for s in subs if s.id is not None} | set(failed))
    if judging is not None and opts.judge is not None:
        opts = replace(opts, judge=judging.reusing(store, system, scored_tasks, subs))
    items, matched = score_all(scored_tasks, subs, opts)
    episodes = episodes_of(store, system)
    report = summarize(items, matched, opts, by=("domain", "category"), errors=failed,
                       trajectories={ep.task_id: ep.trajectory for ep in episodes if ep.attempt == 0})
    steps = {ep.task_id: s for ep in episodes if ep.status == "ok" and (s := episode_steps(ep)) is not None}
    answers = {s.id: list(s.answer) for s in subs if s.id is not None}
    return _Scored(store.dir, system, scored_tasks, items, report, episodes, steps, answers)


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
    timed = [(effort, accuracy) for i in s.items
             if i.status == "scored" and (effort := i.effort) is not None and (accuracy := i.accuracy) is not None]
    if len({effort for effort, _ in timed}) < 2:
        return KuiperCurve(label=label, share=[], curve=[], effort=[], kuiper=None)
    k = kuiper([effort for effort, _ in timed], [float(accuracy >= 0.5) for _, accuracy in timed],
               ties=opts.kuiper_ties)
    n = len(timed)
    return KuiperCurve(label=label, share=[r / n for r in k.ranks], curve=list(k.curve),
                       effort=list(k.effort), kuiper=None if k.reason else k.value)


def _errors(label: str, s: _Scored) -> ErrorBreakdown:
    classes = decompose(s.items, s.answers)
    return ErrorBreakdown(
        label=label, n=len(s.items), n_correct=sum(i.accuracy or 0.0 for i in s.items),
        n_exact=sum(i.accuracy is not None and i.accuracy >= 1.0 for i in s.items),
        n_verbose=sum(i.accuracy is not None and CORRECT_AT <= i.accuracy < 1.0 for i in s.items),
        counts={c: len(classes[c]) for c in ERROR_CLASSES}, ids={c: classes[c] for c in ERROR_CLASSES},
        says_not_found=not_found_ids(s.items, s.answers),
    )


def _labels(scored: Sequence[_Scored]) -> dict[int, str]:
    """The system name, with the run directory's name (else its path) when runs share a name."""
    names = Counter(s.system for s in scored)
    short = {id(s): s.system if names[s.system] == 1 else f"{s.system} ({s.run_dir.name})" for s in scored}
    clashes = Counter(short.values())
    return {id(s): f"{s.system} ({s.run_dir})" if clashes[short[id(s)]] > 1 else short[id(s)] for s in scored}


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


def _oracle_gaps(store: RunStore, scored: Sequence[_Scored]) -> dict[str, OracleGap]:
    """Each system's gap to the oracle on its model in one run, as `deskbench score` gives it."""
    from deskbench.runs.identity import stored_identities
    from deskbench.runs.scorings import StoredItem
    from deskbench.tracks.docqa.outcomes import docqa_outcomes
    from deskbench.tracks.docqa.scoring.oracle_gap import oracle_gaps

    items = [StoredItem.of(o, {}) for s in scored for o in docqa_outcomes(s.items, s.system)]
    ran = {s.system: {e.task_id for e in s.episodes if e.attempt == 0} for s in scored}
    return oracle_gaps(items, store.tasks_of(DocQATask), stored_identities(store), ran)


def _madqa_oracle_gap(store: RunStore, scored: Sequence[_Scored]) -> HumanOracleGap | None:
    """MADQA's Oracle Gap (§5) in one run: its human-oracle answers against its best agent."""
    from deskbench.runs.identity import stored_identities
    from deskbench.runs.scorings import StoredItem
    from deskbench.tracks.docqa.outcomes import docqa_outcomes
    from deskbench.tracks.docqa.scoring.oracle_gap import first_human_oracle, human_oracle_gap

    items = [StoredItem.of(o, {}) for s in scored for o in docqa_outcomes(s.items, s.system)]
    ran = {s.system: {e.task_id for e in s.episodes if e.attempt == 0} for s in scored}
    gap = human_oracle_gap(items, stored_identities(store), ran, first_human_oracle(store))
    return None if gap is None else gap.model_copy(update={"run": str(store.dir)})


def _retrievers(store: RunStore) -> dict[tuple[Path, str], str]:
    """What each system of a run searched with, from its stored configuration (absent: bm25)."""
    from deskbench.runs.identity import stored_identities
    from deskbench.search.retriever_use import SETTING, describe

    return {(store.dir, system): describe(value) for system, identity in stored_identities(store).items()
            if isinstance(value := identity.config.settings.get(SETTING), dict)}


def docqa_report_section(stores: Sequence[RunStore], options: OutcomeOptions,
                         params: Mapping[str, object]) -> ReportSection:
    """Score every system of every docqa run (with a judge in `options`, every non-exact answer is
    judged); budgets run from 1 to the most steps any episode took. `params`: `pool_humans` (the
    annotators of a run make one Human row, tracks/docqa/humans.py), `corpus` (adds the corpus
    statistics, MADQA Tables 2 and 6, to the appendix sections)."""
    from deskbench.runs.outcomes import ItemOutcome
    from deskbench.tracks.docqa.outcomes import DEFINITION, docqa_outcomes
    from deskbench.tracks.docqa.scoring.docqa_attempts import attempt_outcomes, stored_answers

    opts = options.scorer if isinstance(options.scorer, ScoreOptions) else ScoreOptions()
    judging: Judging | None = None
    if params.get("judge"):
        from deskbench.tracks.docqa.score_command import warn_paper_q

        warn_paper_q(str(params["judge"]))
        if opts.judge is not None:  # verdicts stored by 'deskbench score --judge' are read, not asked again
            real = opts.judge
            judging = Judging(spec=str(params["judge"]), opener=lambda: real)
    corpus = params.get("corpus")
    scored: list[_Scored] = []
    imported: set[tuple[Path, str]] = set()  # systems made by 'deskbench import'
    later: dict[tuple[Path, str], list[ItemOutcome]] = {}  # attempts after the first, per (run, system)
    answers: dict[tuple[Path, str], dict[str, str]] = {}  # attempt 0's answer keys (the consistency)
    retrievers: dict[tuple[Path, str], str] = {}  # (run, system) -> its retriever, when not bm25
    modalities: dict[Path, dict[str, str]] = {}  # run -> task id -> its question's visual modality (analyse modality)
    for store in stores:
        imported |= {(store.dir, name) for name in imported_systems(store)}
        if (kept := stored_categories(store)) is not None:
            modalities[store.dir] = kept[1]
        names = pooled_systems(store.systems()) if params.get("pool_humans") else store.systems()
        scored += [_score(store, name, opts, judging) for name in names]
        for name in set(names) & set(store.systems()):  # --attempts K: the later attempts, for pass^k
            later[(store.dir, name)] = attempt_outcomes(store, name, store.tasks_of(DocQATask), opts, first=1)
            answers[(store.dir, name)] = stored_answers(store, name)
        retrievers |= _retrievers(store)
    labels = _labels(scored)
    labels.update({id(s): imported_label(labels[id(s)]) for s in scored if (s.run_dir, s.system) in imported})
    max_steps = max((v for s in scored for v in s.steps.values()), default=0)
    budgets = list(range(1, max(max_steps, 1) + 1))
    out = []
    for s in scored:
        label = labels[id(s)]
        row = _row(label, s)
        row.retriever = retrievers.get((s.run_dir, s.system), row.retriever)
        out.append(SystemReport(
            row=row,
            kuiper_curve=_kuiper_curve(label, s, opts),
            budget=BudgetCurve(label=label, budgets=budgets, accuracy=budget_curve(s.items, s.steps, budgets)),
            errors=_errors(label, s),
            by_domain=s.report.by_domain or {},
            by_category=s.report.by_category or {},
            by_modality=modality_groups(s.items, modalities[s.run_dir], opts) if s.run_dir in modalities else {},
            retrieval=s.report.retrieval,
        ))
    madqa_gaps: list[HumanOracleGap] = []
    for store in stores:  # an oracle is paired with the systems of its own run
        mine = [(s, r) for s, r in zip(scored, out, strict=True) if s.run_dir == store.dir]
        for system, gap in _oracle_gaps(store, [s for s, _ in mine]).items():
            for s, r in mine:
                if s.system == system:
                    r.oracle_gap = gap
        if (madqa_gap := _madqa_oracle_gap(store, [s for s, _ in mine])) is not None:
            madqa_gaps.append(madqa_gap)
    sets = task_sets(scored, labels)
    for s, system_report in zip(scored, out, strict=True):
        system_report.row.task_set = next(t.index for t in sets if labels[id(s)] in t.systems)
    madqa = build_madqa([ScoredSystem(labels[id(s)], s.tasks, s.items, first_attempts(s.episodes), s.system)
                         for s in scored], Path(str(corpus)) if corpus else None) if scored else None
    # the Comparison keeps the leaderboard's labels (pooled humans included), over attempt-0 tasks
    from deskbench.analysis.compare import SystemOutcomes

    ran = [{e.task_id for e in s.episodes if e.attempt == 0} for s in scored]
    systems = [SystemOutcomes(label=labels[id(s)], system=s.system, run_dir=str(s.run_dir),
                              outcomes=docqa_outcomes([i for i in s.items if i.id in r], labels[id(s)],
                                                      answers=answers.get((s.run_dir, s.system)))
                              + later.get((s.run_dir, s.system), []))
               for s, r in zip(scored, ran, strict=True)]
    data = DocqaSection(systems=out, task_sets=sets, madqa=madqa, madqa_oracle_gaps=madqa_gaps,
                        accuracy_method=judge_method(opts, judging) if opts.judge else ANLS_METHOD,
                        judge=opts.judge.name if opts.judge else None)
    return ReportSection(track="docqa", title="docqa (MADQA)", template=TEMPLATE, data=data,
                         n_systems=len(out), summary=f"{len(out)} docqa system(s).",
                         comparisons=compare_several("docqa", DEFINITION, systems),
                         reliability=lone_reliability(systems),
                         model_settings=judge_settings([("answer judge", getattr(opts.judge, "model", None))]))
