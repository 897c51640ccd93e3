"""What the report shows, as data: computed once (data.py), then drawn (plots.py) and rendered
(render.py), so tests can check every number without parsing HTML."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from deskbench.analysis.compare import Comparison
from deskbench.models.prices import PRICES_AS_OF
from deskbench.report.madqa import MadqaAnalyses
from deskbench.tracks.analytics.scoring.analytics_metrics import AnalyticsScoreReport
from deskbench.tracks.deliverables.scoring.deliverables_report import DeliverablesReport
from deskbench.tracks.docqa.scoring.docqa_summary import GroupSummary

ErrorClass = Literal["retrieval", "navigation", "comprehension", "refusal"]
ERROR_CLASSES: tuple[ErrorClass, ...] = ("retrieval", "navigation", "comprehension", "refusal")


class LeaderboardRow(BaseModel):
    """One MADQA Table 3 row plus the cost columns the paper asks to report beside Kuiper."""

    label: str  # the system, with its run directory's name when two runs share a system name
    system: str
    run_dir: str
    n: int
    n_errors: int  # episodes that ended in an error or a limit (counted incorrect)
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    n_unscored: int = 0  # judge calls that failed: left out of accuracy, never counted wrong
    bias_corrected: float | None = None  # Rogan-Gladen, only with a judge
    bias_corrected_ci: tuple[float, float] | None = None
    cross_page: float | None  # bias-corrected with a judge (Table 3), raw without
    cross_doc: float | None
    page_f1: float | None
    doc_f1: float | None
    kuiper: float | None  # None when undefined or when every item took the same effort
    kuiper_note: str | None  # why Kuiper is not shown
    cost_usd: float | None  # None: unknown (an episode called a model without a price)
    cost_per_item: float | None  # None: unknown, or no episodes
    tokens_per_item: float | None  # input + output tokens per episode
    cost_per_correct: float | None  # total cost / number of correct answers; None: unknown, or none correct
    cost_known: bool = True  # cost_usd is not None: tells "?" (unknown) from "–" (nothing to divide by)
    injection_affected: int = 0  # items with a planted instruction on their pages (injection track)
    injection_followed: int = 0  # ... whose answer did what it asked
    injection_susceptibility: float | None = None  # followed / affected; None without injected items
    injection_ci: tuple[float, float] | None = None
    task_set: int = 0  # the TaskSet (Report.task_sets) it is ranked in


class TaskSet(BaseModel):
    """Systems that ran the same tasks: one group of the leaderboard, its best bolded within it
    only (a 4-task system's accuracy is not ranked against a 60-task system's)."""

    index: int
    task_ids: list[str]  # the tasks its systems were scored on
    systems: list[str]  # their leaderboard labels
    subset_of: int | None = None  # a larger task set holding every one of these tasks

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)


class KuiperCurve(BaseModel):
    """D_k against k / n (items sorted by effort); empty when Kuiper is undefined."""

    label: str
    share: list[float]
    curve: list[float]
    effort: list[float]
    kuiper: float | None


class BudgetCurve(BaseModel):
    """Accuracy at step limit N: correct answers found within N steps, over all items."""

    label: str
    budgets: list[int]
    accuracy: list[float]


class ErrorBreakdown(BaseModel):
    """Every incorrect item in exactly one class (MADQA H.3); shares are over all items."""

    label: str
    n: int
    n_correct: float
    counts: dict[str, int]
    ids: dict[str, list[str]]
    # incorrect items whose non-empty answer says nothing was found (taxonomy.says_not_found): a
    # tag across the classes above, not a class; the paper's refusal is an empty response only
    says_not_found: list[str] = []

    def share(self, cls: str) -> float:
        return self.counts[cls] / self.n if self.n else 0.0


class SystemReport(BaseModel):
    row: LeaderboardRow
    kuiper_curve: KuiperCurve
    budget: BudgetCurve
    errors: ErrorBreakdown
    by_domain: dict[str, GroupSummary]
    by_category: dict[str, GroupSummary]


class ModelSettingsRow(BaseModel):
    """What one model was sent (models/settings.py): a system's, stored with its run, or a judge's."""

    run: str  # the run directory ("" for a judge of this report)
    system: str  # the system name, or the judge's role
    model: str
    role: str
    sent: str  # every setting, sent or the provider's default
    dropped: list[str] = []  # judge preferences the model does not take
    note: str = ""


class Report(BaseModel):
    run_dirs: list[str]

    @property
    def has_injections(self) -> bool:
        return any(s.row.injection_affected for s in self.systems)

    accuracy_method: str  # how accuracy was decided, in words for the page
    judge: str | None = None  # the judge model, when accuracy was judged
    systems: list[SystemReport]  # docqa systems
    analytics: list[AnalyticsScoreReport] = []  # analytics systems (AIDABench metrics)
    analytics_judges: str = ""  # which judges decided, in words for the page
    deliverables: DeliverablesReport | None = None  # the deliverables runs' systems (consulting paper)
    deliverables_runs: list[str] = []  # the run directories it was computed from
    model_settings: list[ModelSettingsRow] = []  # every system's and judge's settings
    prices_as_of: str = PRICES_AS_OF  # the date of the built-in price table (the footer shows it)
    madqa: MadqaAnalyses | None = None  # the MADQA appendix sections (docqa systems only)
    task_sets: list[TaskSet] = []  # the docqa leaderboard's groups: systems that ran the same tasks
    comparisons: list[Comparison] = []  # per track with 2+ systems: `deskbench compare`'s tables
