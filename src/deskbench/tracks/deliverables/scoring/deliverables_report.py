"""The deliverables summary's report model (what `deskbench score RUN --json` prints), apart from the code that fills and prints it."""

from __future__ import annotations

from pydantic import BaseModel, Field

from deskbench.models.prices import PRICES_AS_OF
from deskbench.runs.protocol import ProtocolNote
from deskbench.scoring.attempts import AttemptMetrics
from deskbench.tracks.deliverables.scoring.failure_tags import TagCounts
from deskbench.tracks.deliverables.web_deny import PeekingCounts

CI = tuple[float, float]


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
    """Table 15 and the funnel §4.10.2 quotes (see `vrs_diagnostics.SoleCauseSummary`)."""

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
    """One Table 18 row (see `vrs_diagnostics.SensitivityRow`); threshold None when no rule ACCEPT."""

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
    # with --attempts K > 1, per system: pass@k / avg@k of VRS_0 / 100, pass^k with ACCEPT a success,
    # the consistency of the verifiers' outcomes (outcomes.py deliverables_attempts)
    attempts: dict[str, AttemptMetrics] = Field(default_factory=dict)
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
    peeking: dict[str, PeekingCounts] = Field(default_factory=dict)  # no peeking (web_deny.py): denied attempts

    @property
    def graded(self) -> bool:
        return self.n_graded > 0

