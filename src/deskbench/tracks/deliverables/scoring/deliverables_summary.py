"""The consulting paper's result tables (§4.1-4.11, Tables 6-18) over scored deliverables items.

`summarize` turns the per-episode scores of `deliverables.py` into one `DeliverablesReport`
(what `deskbench score RUN --json` prints) and `print_summary` draws it as rich tables.

Rules, applied everywhere:

* Attempt 0 only. The paper grades one response per (prompt, agent); every per-system figure
  and every paired statistic uses each system's attempt 0, so the systems are compared on the
  same responses. Later attempts are counted (`n_other_attempts`) and left out.
* Ungraded items (no usable rubric grade) are left out of every rubric-based metric (rbar, VRS,
  ACCEPT, auto-reject, zeros, criterion tables) and listed; they are never counted as zeros.
  Verifier metrics (V, unobservable and judged verifiers, traps, output files, cost) use every
  attempt-0 item, graded or not.
* Cross-system tables (Tables 9, 13-15, 17, 18, the VRS argmax and V-vs-rbar) use only the tasks
  graded for every system, so each comparison is paired.
* An undefined number (a correlation of a constant column, a mean of nothing) is None in the
  model and "-" when printed, never NaN.
* QC (Appendix C). Every grade in the paper was reviewed by a second SME. By default every usable
  grade counts, reviewed or not, and the share reviewed is shown beside every aggregate (per
  system, pooled, cross-system); `reviewed_only` (--reviewed-only) counts only grades QC has
  reviewed (status "reviewed"), the others are listed as ungraded. A returned grade never counts.
* `protocol` names which protocol produced each number (paper or deskbench), see runs/protocol.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import combinations

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.analysis.stats import (
    Correlation,
    bonferroni,
    bootstrap_means_ci,
    cohens_d,
    correlation_matrix,
    holm,
    mcnemar_exact,
    pearson_test,
    sole_cause_summary,
    spearman,
    weight_sensitivity,
    wilson_interval,
)
from deskbench.models.prices import PRICES_AS_OF, UNKNOWN, per, total_cost
from deskbench.runs.protocol import ProtocolNote, describe, deskbench, paper
from deskbench.tasks.deliverables import RUBRIC_CODES, DeliverableTask
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.failure_tags import TagCounts, tag_table
from deskbench.tracks.deliverables.scoring.rubric_qc import STAR_TARGETS
from deskbench.tracks.deliverables.scoring.vrs import GradedRow

NO_GRADES_NOTE = "no rubric grades: run `deskbench rubric grade` or `deskbench rubric import`"
_TIE = 1e-9  # strict VRS values closer than this tie for the per-task argmax

CI = tuple[float, float]


def _num(x: float | None) -> float | None:
    """None for an undefined value (None, NaN, +-inf), else the float."""
    return None if x is None or not math.isfinite(x) else float(x)


def _ci(ci: tuple[float, float] | None) -> CI | None:
    if ci is None or _num(ci[0]) is None or _num(ci[1]) is None:
        return None
    return (float(ci[0]), float(ci[1]))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --- the report model ------------------------------------------------------------------------


class MeanCI(BaseModel):
    """A mean over n items with its percentile-bootstrap 95% CI (None when n = 0)."""

    mean: float | None
    ci: CI | None
    n: int


class Rate(BaseModel):
    """count / n with a Wilson 95% CI (None when n = 0)."""

    count: int
    n: int
    rate: float | None
    ci: CI | None = None


class TrapCounts(BaseModel):
    fell: int = 0
    avoided: int = 0
    unobservable: int = 0


class CriterionStats(BaseModel):
    """One criterion over n graded items: hard zeros (Table 10), mean, share >= 2 (Table 16)."""

    n: int
    zeros: int
    mean: float | None
    pass_rate: float | None


class StarMean(BaseModel):
    """C.6: the mean of one star rating (1-5) over the n graded items QC rated."""

    mean: float | None
    n: int


class SystemRow(BaseModel):
    """Table 6 for one system (attempt 0), with Table 10/12/16's per-system parts.

    rbar, VRS, ACCEPT, auto-reject, zeros and the criteria are over the graded items; V, files,
    verifier counts, traps and cost over every attempt-0 item. rbar, V (when every item is
    graded) and both VRS variants share one bootstrap index matrix (paired)."""

    system: str
    n_items: int  # attempt-0 items
    n_graded: int
    n_ungraded: int
    ungraded: list[str]  # task ids of the ungraded items
    missing: list[str]  # tasks of the run without an attempt-0 episode of this system
    rbar: MeanCI
    v: MeanCI
    vrs_strict: MeanCI
    vrs_relaxed: MeanCI
    vrs_delta: float | None  # relaxed - strict (Table 12)
    accept: Rate
    auto_reject: Rate  # items with a criterion at 0 (Table 12's "# attempts with min r = 0")
    zeros: int  # total criterion zeros, out of 5 x n_graded
    files: Rate  # items producing every required file, over the items whose task requires files
    verifiers: int  # verifier results over all items
    unobservable: int
    judged: int
    cost_usd: float | None  # None: unknown (an item's episode called a model without a price)
    mean_cost_usd: float | None  # None: unknown, or no items
    cost_known: bool = True
    traps: TrapCounts
    criteria: dict[str, CriterionStats]
    # grades QC reviewed, over the attempt-0 items holding a grade (counted or not)
    reviewed: Rate = Field(default_factory=lambda: Rate(count=0, n=0, rate=None))
    stars: dict[str, StarMean] = Field(default_factory=dict)  # C.6, over the counted grades


class ClassCell(BaseModel):
    n: int  # graded items of the system in the class
    vrs_strict: float | None
    rbar: float | None


class PairD(BaseModel):
    """Cohen's d on rbar, positive favouring `a` (Table 8)."""

    a: str
    b: str
    d: float | None
    n_a: int
    n_b: int


class ClassRow(BaseModel):
    """Table 7 (mean strict VRS) and Table 8 (Cohen's d) for one prompt class."""

    prompt_class: str
    n_tasks: int
    cells: dict[str, ClassCell]
    winners: list[str]  # best mean strict VRS (ties: several); empty with fewer than two values
    cohens_d: list[PairD]


class AcceptCount(BaseModel):
    """Table 9: tasks accepted by exactly k systems."""

    k: int
    tasks: int
    share: float | None


class ArgmaxWins(BaseModel):
    """Per-task strict-VRS argmax wins, a tie split equally between the tied systems."""

    system: str
    wins: float
    share: float | None


class McNemarRow(BaseModel):
    """Table 17: paired ACCEPTs of a and b on the common tasks, exact p, Holm-adjusted p."""

    a: str
    b: str
    both: int
    a_only: int
    b_only: int
    neither: int
    p: float
    p_holm: float


class Corr(BaseModel):
    rho: float | None
    p: float | None
    n: int


class AcceptCorrelation(BaseModel):
    """Table 14: Spearman of one predictor (V or a criterion) with ACCEPT; `pooled.p` raw,
    `p_bonferroni` corrected for the family of six tests (as the paper's caption)."""

    predictor: str
    pooled: Corr
    p_bonferroni: float | None = None
    by_system: dict[str, Corr]


class SoleCause(BaseModel):
    """Table 15 and the funnel §4.10.2 quotes (see `stats.SoleCauseSummary`)."""

    cleared_v: int
    all_at_least_2: int
    accepted_all_at_least_2: int
    counts: dict[str, int]
    total: int
    auto_rejected: int
    one_below_2_accepted: int = 0  # V >= 80, one criterion < 2, accepted: no failure, not counted


class SmeBest(BaseModel):
    """§4.4: the per-task strict-VRS argmax against the grader's declared best response, over the
    tasks where exactly one system's grade declares it (the paper: 38 of 42, 90.5%). A tied
    argmax agrees when the declared system is among the tied."""

    declared: int  # tasks with exactly one declared best
    agree: int
    share: float | None
    tied: int  # of the declared tasks, those whose argmax is a tie
    conflicting: int  # tasks where several systems are declared best: left out
    undeclared: int  # tasks with no declared best: left out
    disagree_tasks: list[str] = Field(default_factory=list)


class Sensitivity(BaseModel):
    """One Table 18 row (see `stats.SensitivityRow`); threshold None when no rule ACCEPT."""

    weighting: str
    mean_vrs: dict[str, float | None]
    threshold: float | None
    accepts: int
    rule_accepts: int
    split: dict[str, int]
    jaccard: float


class CrossSystem(BaseModel):
    """The tables over the tasks graded for every system (attempt 0)."""

    systems: list[str]
    tasks: list[str]
    excluded_tasks: list[str]  # tasks some system has no graded attempt-0 item for
    accept_counts: list[AcceptCount]  # empty with one system
    argmax: list[ArgmaxWins]  # empty with one system
    mcnemar: list[McNemarRow]  # empty with one system
    criterion_pearson: dict[str, dict[str, float | None]]
    v_rbar: dict[str, Corr]  # per system
    v_rbar_pooled: Corr
    accept_spearman: list[AcceptCorrelation]
    sole_cause: SoleCause
    sensitivity_relaxed: list[Sensitivity]
    sensitivity_strict: list[Sensitivity]
    sme_best: SmeBest | None = None  # None with one system
    reviewed: Rate = Field(default_factory=lambda: Rate(count=0, n=0, rate=None))  # of the pooled grades used


class UngradedItem(BaseModel):
    system: str
    task_id: str
    grader: str | None = None
    grade_status: str | None = None  # "returned": QC sent the grade back; with --reviewed-only also unreviewed / pending
    return_reasons: list[str] = Field(default_factory=list)


class DeliverablesReport(BaseModel):
    systems: list[str]
    tasks: list[str]
    attempt: int = 0  # the attempt every table is computed on
    n_other_attempts: int = 0  # items of later attempts, left out
    resamples: int
    seed: int
    n_graded: int
    rows: list[SystemRow]
    criteria_pooled: dict[str, CriterionStats]
    by_class: list[ClassRow]
    cross: CrossSystem | None = None  # None when no task is graded for every system
    ungraded: list[UngradedItem] = Field(default_factory=list)
    failure_tags: TagCounts | None = None  # Table 11 by the regex tagger (`rubric tags --model` adds an LLM's)
    notes: list[str] = Field(default_factory=list)
    prices_as_of: str = PRICES_AS_OF  # the date of the built-in price table the costs come from
    reviewed_only: bool = False  # only QC-reviewed grades counted (--reviewed-only)
    reviewed: Rate = Field(default_factory=lambda: Rate(count=0, n=0, rate=None))  # pooled, as SystemRow.reviewed
    protocol: list[ProtocolNote] = Field(default_factory=list)  # the score side: which protocol made each number
    run_protocol: dict[str, list[ProtocolNote]] = Field(default_factory=dict)  # the run side, per system

    @property
    def graded(self) -> bool:
        return self.n_graded > 0


# --- computing it ----------------------------------------------------------------------------


def _rate(count: int, n: int) -> Rate:
    return Rate(count=count, n=n, rate=count / n if n else None, ci=_ci(wilson_interval(count, n)) if n else None)


def _corr(c: Correlation) -> Corr:
    return Corr(rho=_num(c.rho), p=_num(c.p), n=c.n)


def _criteria(graded: Sequence[DeliverableItemScore]) -> dict[str, CriterionStats]:
    out = {}
    for code in RUBRIC_CODES:
        vals = [i.scores[code] for i in graded if i.scores is not None]
        out[code] = CriterionStats(
            n=len(vals), zeros=sum(v == 0 for v in vals), mean=_mean([float(v) for v in vals]),
            pass_rate=sum(v >= 2 for v in vals) / len(vals) if vals else None)
    return out


def _means_ci(columns: dict[str, list[float]], resamples: int, seed: int) -> dict[str, MeanCI]:
    cis = bootstrap_means_ci(columns, resamples=resamples, seed=seed) if columns else {}
    return {name: MeanCI(mean=_mean(vals), ci=_ci(cis.get(name)), n=len(vals)) for name, vals in columns.items()}


def _reviewed(items: Iterable[DeliverableItemScore]) -> Rate:
    """Grades QC reviewed, over the items holding a grade (counted, returned or left out)."""
    statuses = [i.grade_status for i in items if i.grade_status is not None]
    return _rate(sum(s == "reviewed" for s in statuses), len(statuses))


def _stars(graded: Sequence[DeliverableItemScore]) -> dict[str, StarMean]:
    out = {}
    for t in STAR_TARGETS:
        vals = [float(i.stars[t]) for i in graded if t in i.stars]
        out[t] = StarMean(mean=_mean(vals), n=len(vals))
    return out


def _system_row(system: str, items: list[DeliverableItemScore], task_ids: list[str],
                resamples: int, seed: int, reviewed: Rate | None = None) -> SystemRow:
    graded = [i for i in items if i.graded]
    cols: dict[str, list[float]] = {
        "rbar": [i.reasoning_mean for i in graded],  # type: ignore[misc]
        "vrs_strict": [i.vrs_strict for i in graded],  # type: ignore[misc]
        "vrs_relaxed": [i.vrs_relaxed for i in graded],  # type: ignore[misc]
    }
    v_all = [i.v for i in items]
    if len(graded) == len(items):  # V on the same items: one paired bootstrap for all four
        stats = _means_ci({**cols, "v": v_all}, resamples, seed)
    else:
        stats = _means_ci(cols, resamples, seed) | _means_ci({"v": v_all}, resamples, seed)
    traps = TrapCounts()
    for item in items:
        for t in item.traps:
            setattr(traps, t.outcome, getattr(traps, t.outcome) + 1)
    needing = [i for i in items if i.files_ok is not None]
    strict, relaxed = stats["vrs_strict"].mean, stats["vrs_relaxed"].mean
    cost = total_cost(i.cost_usd for i in items)
    present = {i.task_id for i in items}
    criteria = _criteria(graded)
    return SystemRow(
        system=system, n_items=len(items), n_graded=len(graded), n_ungraded=len(items) - len(graded),
        ungraded=[i.task_id for i in items if not i.graded], missing=[t for t in task_ids if t not in present],
        rbar=stats["rbar"], v=stats["v"], vrs_strict=stats["vrs_strict"], vrs_relaxed=stats["vrs_relaxed"],
        vrs_delta=None if strict is None or relaxed is None else relaxed - strict,
        accept=_rate(sum(bool(i.accept) for i in graded), len(graded)),
        auto_reject=_rate(sum(bool(i.auto_reject) for i in graded), len(graded)),
        zeros=sum(c.zeros for c in criteria.values()),
        files=_rate(sum(bool(i.files_ok) for i in needing), len(needing)),
        verifiers=sum(i.passed + i.failed + i.unobservable for i in items), unobservable=sum(i.unobservable for i in items),
        judged=sum(i.judged for i in items), cost_usd=cost, mean_cost_usd=per(cost, len(items)),
        cost_known=cost is not None,
        traps=traps, criteria=criteria, reviewed=reviewed if reviewed is not None else _reviewed(items),
        stars=_stars(graded),
    )


def _by_class(systems: list[str], first: dict[tuple[str, str], DeliverableItemScore],
              classes: dict[str, str]) -> list[ClassRow]:
    rows = []
    for cls in sorted(set(classes.values())):
        cells: dict[str, ClassCell] = {}
        rbars: dict[str, list[float]] = {}
        for s in systems:
            graded = [it for (sys_, tid), it in first.items() if sys_ == s and classes[tid] == cls and it.graded]
            rbars[s] = [it.reasoning_mean for it in graded]  # type: ignore[misc]
            cells[s] = ClassCell(n=len(graded), vrs_strict=_mean([it.vrs_strict for it in graded]),  # type: ignore[misc]
                                 rbar=_mean(rbars[s]))
        values = {s: c.vrs_strict for s, c in cells.items() if c.vrs_strict is not None}
        best = max(values.values()) if len(values) > 1 else None
        winners = [s for s, v in values.items() if best is not None and v >= best - _TIE]
        pairs = [PairD(a=a, b=b, d=_num(cohens_d(rbars[a], rbars[b])), n_a=len(rbars[a]), n_b=len(rbars[b]))
                 for a, b in combinations(systems, 2)]
        rows.append(ClassRow(prompt_class=cls, n_tasks=sum(c == cls for c in classes.values()),
                             cells=cells, winners=winners, cohens_d=pairs))
    return rows


def _sensitivity(rows: list[GradedRow], strict: bool) -> list[Sensitivity]:
    return [Sensitivity(weighting=r.weighting, mean_vrs={s: _num(v) for s, v in r.mean_vrs.items()},
                        threshold=_num(r.threshold), accepts=r.accepts, rule_accepts=r.rule_accepts,
                        split=r.split, jaccard=r.jaccard)
            for r in weight_sensitivity(rows, strict=strict)]


def _cross(systems: list[str], task_ids: list[str],
           first: dict[tuple[str, str], DeliverableItemScore]) -> CrossSystem | None:
    common = [t for t in task_ids if all((s, t) in first and first[(s, t)].graded for s in systems)]
    if not common:
        return None
    excluded = [t for t in task_ids if t not in common]
    items = {s: [first[(s, t)] for t in common] for s in systems}
    pooled = [it for s in systems for it in items[s]]
    n = len(common)
    pairwise = len(systems) > 1

    accept_counts: list[AcceptCount] = []
    sme_best: SmeBest | None = None
    argmax: list[ArgmaxWins] = []
    mcnemar: list[McNemarRow] = []
    if pairwise:
        per_task = [sum(bool(items[s][k].accept) for s in systems) for k in range(n)]
        accept_counts = [AcceptCount(k=k, tasks=per_task.count(k), share=per_task.count(k) / n)
                         for k in range(len(systems) + 1)]
        wins = dict.fromkeys(systems, 0.0)
        for k in range(n):
            vrs = {s: float(items[s][k].vrs_strict or 0.0) for s in systems}
            top = max(vrs.values())
            tied = [s for s in systems if vrs[s] >= top - _TIE]
            for s in tied:
                wins[s] += 1 / len(tied)
        argmax = [ArgmaxWins(system=s, wins=wins[s], share=wins[s] / n) for s in systems]
        sme_best = _sme_best(systems, common, items)
        tests = [(a, b, mcnemar_exact([bool(i.accept) for i in items[a]], [bool(i.accept) for i in items[b]]))
                 for a, b in combinations(systems, 2)]
        adjusted = holm([m.p for _, _, m in tests])
        mcnemar = [McNemarRow(a=a, b=b, both=m.both, a_only=m.a_only, b_only=m.b_only, neither=m.neither,
                              p=m.p, p_holm=q) for (a, b, m), q in zip(tests, adjusted, strict=True)]

    def column(its: Iterable[DeliverableItemScore], key: str) -> list[float]:
        if key == "V":
            return [i.v for i in its]
        return [float(i.scores[key]) for i in its]  # type: ignore[index]

    matrix = correlation_matrix({c: column(pooled, c) for c in RUBRIC_CODES}, method="pearson")
    accept_rows = []
    for key in ("V", *RUBRIC_CODES):
        accept_rows.append(AcceptCorrelation(
            predictor=key,
            pooled=_corr(spearman(column(pooled, key), [float(bool(i.accept)) for i in pooled])),
            by_system={s: _corr(spearman(column(items[s], key), [float(bool(i.accept)) for i in items[s]]))
                       for s in systems}))
    # Table 14's caption: "significant after Bonferroni correction for six tests" (V + five criteria)
    for row, q in zip(accept_rows, bonferroni([r.pooled.p for r in accept_rows]), strict=True):
        row.p_bonferroni = q
    rows = [GradedRow(system=i.system, task_id=i.task_id, v=i.v, scores=i.scores or {}, prompt_class=i.prompt_class)
            for i in pooled]
    sc = sole_cause_summary(rows)
    return CrossSystem(
        systems=systems, tasks=common, excluded_tasks=excluded, accept_counts=accept_counts, argmax=argmax,
        mcnemar=mcnemar,
        criterion_pearson={a: {b: _num(r) for b, r in row.items()} for a, row in matrix.items()},
        v_rbar={s: _corr(pearson_test([i.v for i in items[s]], [i.reasoning_mean for i in items[s]]))
                for s in systems},
        v_rbar_pooled=_corr(pearson_test([i.v for i in pooled], [i.reasoning_mean for i in pooled])),
        accept_spearman=accept_rows,
        sole_cause=SoleCause(cleared_v=sc.cleared_v, all_at_least_2=sc.all_at_least_2,
                             accepted_all_at_least_2=sc.accepted_all_at_least_2, counts=sc.sole_cause,
                             total=sc.sole_cause_total, auto_rejected=sc.auto_rejected,
                             one_below_2_accepted=sc.one_below_2_accepted),
        sensitivity_relaxed=_sensitivity(rows, strict=False),
        sensitivity_strict=_sensitivity(rows, strict=True),
        sme_best=sme_best, reviewed=_reviewed(pooled),
    )


def _sme_best(systems: list[str], tasks: list[str], items: dict[str, list[DeliverableItemScore]]) -> SmeBest:
    declared = agree = tied = conflicting = undeclared = 0
    disagree: list[str] = []
    for k, task in enumerate(tasks):
        best = [s for s in systems if items[s][k].declared_best]
        if not best:
            undeclared += 1
            continue
        if len(best) > 1:
            conflicting += 1
            continue
        vrs = {s: float(items[s][k].vrs_strict or 0.0) for s in systems}
        top = max(vrs.values())
        argmax = [s for s in systems if vrs[s] >= top - _TIE]
        declared += 1
        tied += len(argmax) > 1
        if best[0] in argmax:
            agree += 1
        else:
            disagree.append(task)
    return SmeBest(declared=declared, agree=agree, share=agree / declared if declared else None, tied=tied,
                   conflicting=conflicting, undeclared=undeclared, disagree_tasks=disagree)


def _uncounted(item: DeliverableItemScore) -> DeliverableItemScore:
    """The item with its grade left out (--reviewed-only: not reviewed by QC)."""
    return item.model_copy(update={"scores": None, "reasoning_mean": None, "vrs_relaxed": None,
                                   "vrs_strict": None, "accept": None, "auto_reject": None})


def protocol_notes(reviewed_only: bool, reviewed: Rate, *, pairs: bool = True) -> list[ProtocolNote]:
    """The score-side protocol of a deliverables summary: which grades count, how sole-cause
    failures are attributed, how the tests are corrected (Table 17's only with `pairs`)."""
    share = f"{reviewed.count} of {reviewed.n} grades QC-reviewed" + (
        f" ({fmt_pct(reviewed.rate)})" if reviewed.rate is not None else "")
    if reviewed_only:
        grades = paper("grades counted", f"QC-reviewed grades only, as every grade in the paper was reviewed "
                                         f"(Appendix C; --reviewed-only); {share}")
    else:
        grades = deskbench("grades counted", f"every usable grade, unreviewed and QC-pending ones included; {share} "
                                             "(--reviewed-only counts reviewed grades only, as the paper)")
    notes = [
        grades,
        paper("sole-cause attribution", "§4.10.2: rejected responses with V >= 80 and exactly one criterion below 2 "
                                        "(an accepted one is no failure)"),
        paper("significance correction (Table 14)", "Bonferroni over the six Spearman tests (p and p_bonferroni)"),
    ]
    if pairs:
        notes.append(deskbench("significance correction (Table 17)", "Holm over the agent pairs (p and p_holm); the "
                                                                     "paper reports uncorrected p and recommends Holm"))
    return notes


def summarize(items: list[DeliverableItemScore], tasks: list[DeliverableTask], *,
              resamples: int = 1000, seed: int = 0, reviewed_only: bool = False) -> DeliverablesReport:
    """Tables 6-18 over `items` (attempt 0 of each system; see the module docstring for which
    items each table uses). `tasks` gives the task list (class sizes, tasks a system has no
    episode for); items of tasks not in it still count, with their own prompt class.
    `reviewed_only`: only QC-reviewed grades count; the others are listed as ungraded."""
    share_of = {s: _reviewed(i for i in items if i.system == s and i.attempt == 0) for s in {i.system for i in items}}
    pooled_share = _reviewed(i for i in items if i.attempt == 0)
    if reviewed_only:
        items = [i if not i.graded or i.grade_status == "reviewed" else _uncounted(i) for i in items]
    first: dict[tuple[str, str], DeliverableItemScore] = {}
    for item in items:
        if item.attempt == 0:
            if (item.system, item.task_id) in first:
                raise ValueError(f"two attempt-0 items for {item.system} / {item.task_id}")
            first[(item.system, item.task_id)] = item
    systems = list(dict.fromkeys(i.system for i in items))
    task_ids = list(dict.fromkeys([t.id for t in tasks] + [i.task_id for i in items]))
    classes = {t.id: t.prompt_class for t in tasks} | {i.task_id: i.prompt_class for i in items}
    per_system = {s: [first[(s, t)] for t in task_ids if (s, t) in first] for s in systems}
    rows = [_system_row(s, per_system[s], task_ids, resamples, seed, share_of[s]) for s in systems]
    graded_all = [i for its in per_system.values() for i in its if i.graded]
    n_other = sum(i.attempt != 0 for i in items)

    notes = []
    if n_other:
        notes.append(f"{n_other} item(s) of attempts after the first are left out: every table uses attempt 0")
    cross = None
    if not graded_all:
        notes.append(NO_GRADES_NOTE)
    else:
        cross = _cross(systems, task_ids, first)
        if cross is None:
            notes.append("no task is graded for every system: the cross-system tables need at least one")
        elif cross.excluded_tasks:
            notes.append(f"{len(cross.excluded_tasks)} task(s) not graded for every system are left out of the "
                         f"cross-system tables: {', '.join(cross.excluded_tasks)}")
    if len(systems) == 1:
        notes.append("one system: no pairwise tables (Cohen's d, Table 9, argmax, McNemar)")
    ungraded = [UngradedItem(system=i.system, task_id=i.task_id, grader=i.grader, grade_status=i.grade_status,
                             return_reasons=i.return_reasons)
                for s in systems for i in per_system[s] if not i.graded]
    if reviewed_only:
        left = [u for u in ungraded if u.grade_status in ("unreviewed", "pending")]
        if left:
            notes.append(f"--reviewed-only: {len(left)} grade(s) not (yet) reviewed by QC are left out: "
                         + ", ".join(f"{u.system}/{u.task_id} ({u.grade_status})" for u in left))
    elif pooled_share.n and pooled_share.count < pooled_share.n:
        notes.append(f"{pooled_share.n - pooled_share.count} of {pooled_share.n} grade(s) are not reviewed by QC "
                     "and still count; --reviewed-only counts reviewed grades only (Appendix C)")
    if ungraded and graded_all:
        notes.append(f"{len(ungraded)} ungraded item(s) are left out of the rubric-based metrics (never counted as 0)")
    for r in rows:
        if r.missing:
            notes.append(f"{r.system}: no episode for {len(r.missing)} task(s): {', '.join(r.missing)}")
    return DeliverablesReport(
        systems=systems, tasks=task_ids, n_other_attempts=n_other, resamples=resamples, seed=seed,
        n_graded=len(graded_all), rows=rows, criteria_pooled=_criteria(graded_all),
        by_class=_by_class(systems, first, classes), cross=cross, ungraded=ungraded, notes=notes,
        reviewed_only=reviewed_only, reviewed=pooled_share, protocol=protocol_notes(reviewed_only, pooled_share, pairs=len(systems) > 1),
    )


# --- printing --------------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 2) -> str:
    """A number, or "-" when undefined."""
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f}%"


def fmt_ci(m: MeanCI, digits: int = 2, scale: float = 1.0) -> str:
    if m.mean is None:
        return "-"
    text = f"{m.mean * scale:.{digits}f}"
    if m.ci is not None:
        text += f" [{m.ci[0] * scale:.{digits}f}, {m.ci[1] * scale:.{digits}f}]"
    return text


def fmt_rate(r: Rate, ci: bool = True) -> str:
    if r.rate is None:
        return "-"
    text = f"{100 * r.rate:.1f}%"
    if ci and r.ci is not None:
        text += f" [{100 * r.ci[0]:.1f}, {100 * r.ci[1]:.1f}]"
    return text + f" ({r.count}/{r.n})"


def fmt_p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "-"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.2e}"


def _table(title: str, *columns: str) -> Table:
    t = Table(title=escape(title), title_justify="left")
    for k, c in enumerate(columns):
        t.add_column(escape(c), justify="left" if k == 0 else "right")
    return t


def _show(console: Console, table: Table) -> None:
    """The table with its title on a line of its own (a narrow table would wrap it)."""
    if table.title:
        console.print(f"[bold]{table.title}[/bold]")
        table.title = None
    console.print(table)


def _table6(report: DeliverablesReport) -> Table:
    t = _table("Table 6: main metrics (attempt 0; VRS strict unless noted; 95% CIs)", "Metric",
               *report.systems)
    rows = report.rows
    graded = report.graded

    def add(label: str, cells: Iterable[str]) -> None:
        t.add_row(label, *(escape(c) for c in cells))

    if graded:
        add("Mean reasoning rbar (0-3)", (fmt_ci(r.rbar) for r in rows))
    add("Mean verifier pass rate V (%)", (fmt_ci(r.v) for r in rows))
    if graded:
        add("Mean VRS, strict (0-100)", (fmt_ci(r.vrs_strict) for r in rows))
        add("Mean VRS, relaxed (0-100)", (fmt_ci(r.vrs_relaxed) for r in rows))
        add("ACCEPT rate", (fmt_rate(r.accept) for r in rows))
        add("Auto-reject rate (a criterion = 0)", (fmt_rate(r.auto_reject, ci=False) for r in rows))
        add("Total criterion zeros", (f"{r.zeros} / {5 * r.n_graded}" for r in rows))
    add("Output-file production rate", (fmt_rate(r.files, ci=False) for r in rows))
    add("Graded / ungraded", (f"{r.n_graded} / {r.n_ungraded}" for r in rows))
    add("Grades QC-reviewed" + (" (only these count)" if report.reviewed_only else ""),
        (fmt_rate(r.reviewed, ci=False) for r in rows))
    add("Verifiers unobservable / judged", (f"{r.unobservable} / {r.judged} of {r.verifiers}" for r in rows))
    add("Traps fell / avoided / unobservable",
        (f"{r.traps.fell} / {r.traps.avoided} / {r.traps.unobservable}" for r in rows))
    add(f"Mean cost per episode (USD, prices as of {report.prices_as_of})",
        (fmt(r.mean_cost_usd, 4) if r.cost_known else UNKNOWN for r in rows))
    return t


def print_summary(report: DeliverablesReport, console: Console) -> None:
    """Every table of the report that has data, then the notes and the ungraded items."""
    systems = report.systems
    pairs = len(systems) > 1
    if report.protocol:
        console.print(f"protocol: {escape(describe(report.protocol))}")
    for system, notes in report.run_protocol.items():
        if notes:
            console.print(f"protocol of {escape(system)}: {escape(describe(notes))}")
    console.print(f"grades QC-reviewed: {escape(fmt_rate(report.reviewed, ci=False))}"
                  + (" (--reviewed-only: only these count)" if report.reviewed_only else " (all usable grades count)"))
    _show(console, _table6(report))
    if report.failure_tags is not None and report.failure_tags.cells:
        _show(console, tag_table(report.failure_tags))
    if report.graded:
        t = _table("Table 7: mean strict VRS by prompt class (n graded)", "Class", "tasks", *systems)
        for row in report.by_class:
            t.add_row(row.prompt_class, str(row.n_tasks), *(
                f"{fmt(row.cells[s].vrs_strict)} (n={row.cells[s].n})" + (" *" if s in row.winners else "")
                for s in systems))
        _show(console, t)
        if pairs:
            labels = [f"{a} vs {b}" for a, b in combinations(systems, 2)]
            t = _table("Table 8: Cohen's d on rbar by class (positive favours the first)", "Class", *labels)
            for row in report.by_class:
                t.add_row(row.prompt_class, *(fmt(p.d) for p in row.cohens_d))
            _show(console, t)
        t = _table("Tables 10 and 16: criterion zeros (mean) and pass rate (share >= 2)", "Criterion",
                   *systems, "Pooled")
        for code in RUBRIC_CODES:
            cells = [r.criteria[code] for r in report.rows] + [report.criteria_pooled[code]]
            t.add_row(code, *(f"{c.zeros} ({fmt(c.mean)}) {fmt_pct(c.pass_rate)}" for c in cells))
        t.add_row("Total zeros", *(str(r.zeros) for r in report.rows),
                  str(sum(c.zeros for c in report.criteria_pooled.values())))
        _show(console, t)
        if any(c.n for r in report.rows for c in r.stars.values()):
            t = _table("C.6 star ratings by QC (mean 1-5 (n rated); not used in VRS or ACCEPT)", "Rating",
                       *systems)
            for target in STAR_TARGETS:
                t.add_row("all verifiers" if target == "verifiers" else target,
                          *(f"{fmt(r.stars[target].mean)} (n={r.stars[target].n})" for r in report.rows))
            _show(console, t)
        t = _table("Table 12: strict vs relaxed VRS", "System", "Strict", "Relaxed", "Delta", "# with a zero")
        for r in report.rows:
            t.add_row(escape(r.system), fmt(r.vrs_strict.mean), fmt(r.vrs_relaxed.mean), fmt(r.vrs_delta),
                      f"{r.auto_reject.count} / {r.auto_reject.n}")
        _show(console, t)
    cross = report.cross
    if cross is not None:
        _print_cross(cross, console, pairs)
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    if report.ungraded and report.graded:
        console.print("ungraded (left out of rubric metrics): " + escape(", ".join(
            f"{u.system}/{u.task_id}" + (f" ({u.grade_status})" if u.grade_status else "") for u in report.ungraded)))
    for u in report.ungraded:
        if u.return_reasons:
            console.print(f"returned to {escape(u.grader or '?')} for a regrade: {escape(u.system)}/{escape(u.task_id)}: "
                          + escape("; ".join(u.return_reasons)))


def _print_cross(cross: CrossSystem, console: Console, pairs: bool) -> None:
    systems = cross.systems
    n = len(cross.tasks)
    console.print(f"Cross-system tables over the {n} task(s) graded for every system "
                  f"(grades QC-reviewed: {escape(fmt_rate(cross.reviewed, ci=False))}).")
    if pairs:
        t = _table("Table 9: systems accepting per task", "# accepting", "# tasks", "%")
        for row in cross.accept_counts:
            t.add_row(str(row.k), str(row.tasks), fmt_pct(row.share))
        _show(console, t)
        t = _table("Per-task strict-VRS argmax wins (ties split)", "System", "Wins", "%")
        for w in cross.argmax:
            t.add_row(escape(w.system), fmt(w.wins), fmt_pct(w.share))
        _show(console, t)
        b = cross.sme_best
        if b is not None:
            text = (f"VRS argmax vs the grader's declared best (§4.4): {b.agree} of {b.declared} task(s) agree"
                    + (f" ({fmt_pct(b.share)})" if b.share is not None else "")
                    + f"; {b.tied} tied argmax; left out: {b.undeclared} without a declared best, "
                    f"{b.conflicting} with several" + (f"; disagree: {', '.join(b.disagree_tasks)}" if b.disagree_tasks else ""))
            console.print(escape(text))
        t = _table("Table 17: paired ACCEPT (exact McNemar, Holm-adjusted)", "Pair", "Both", "A only",
                   "B only", "Neither", "p", "p (Holm)")
        for m in cross.mcnemar:
            t.add_row(escape(f"{m.a} vs {m.b}"), str(m.both), str(m.a_only), str(m.b_only), str(m.neither),
                      fmt_p(m.p), fmt_p(m.p_holm))
        _show(console, t)
    t = _table("Table 13: Pearson correlation of the criteria (pooled)", "", *RUBRIC_CODES)
    for a in RUBRIC_CODES:
        t.add_row(a, *(fmt(cross.criterion_pearson[a][b]) for b in RUBRIC_CODES))
    _show(console, t)
    t = _table("Pearson of V with rbar", "System", "r", "p", "n")
    for s, c in [*cross.v_rbar.items(), ("pooled", cross.v_rbar_pooled)]:
        t.add_row(escape(s), fmt(c.rho), fmt_p(c.p), str(c.n))
    _show(console, t)
    t = _table("Table 14: Spearman with ACCEPT (p raw and Bonferroni-corrected for the six tests)", "Predictor",
               "rho (pooled)", "p", "p (Bonferroni)", *(f"rho ({s})" for s in systems))
    for row in cross.accept_spearman:
        t.add_row(row.predictor, fmt(row.pooled.rho, 3), fmt_p(row.pooled.p), fmt_p(row.p_bonferroni),
                  *(fmt(row.by_system[s].rho, 3) for s in systems))
    _show(console, t)
    sc = cross.sole_cause
    t = _table(f"Table 15: sole-cause rejections ({sc.total}; {sc.cleared_v} cleared V >= 80, "
               f"{sc.all_at_least_2} with all >= 2, {sc.accepted_all_at_least_2} of them accepted; "
               f"{sc.one_below_2_accepted} accepted with one below 2, not counted)",
               "Criterion", "Sole-cause", "%")
    for code in RUBRIC_CODES:
        t.add_row(code, str(sc.counts[code]), fmt_pct(sc.counts[code] / sc.total if sc.total else None))
    _show(console, t)
    for label, rows in (("relaxed", cross.sensitivity_relaxed), ("strict", cross.sensitivity_strict)):
        t = _table(f"Table 18: VRS weight sensitivity, {label} (the paper's caption says strict, its numbers "
                   "match relaxed)", "Variant", *systems, "T", "Split", "Jaccard")
        for r in rows:
            t.add_row(r.weighting, *(fmt(r.mean_vrs[s]) for s in systems), fmt(r.threshold),
                      " / ".join(str(r.split[s]) for s in systems), fmt(r.jaccard))
        _show(console, t)
