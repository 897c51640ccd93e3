"""docqa's report curves as data: the Kuiper curve, accuracy within a step budget and the error
decomposition of one system (MADQA Figures 6-10). Apart from report_models.py because the
figures (report_plots.py) draw these and the section (report_models.py) draws its figures: both
import this module, neither the other's."""

from __future__ import annotations

from pydantic import BaseModel


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
    # correct items split as MADQA's Figure 8 splits them: exact (accuracy 1) and verbose (a judge's
    # 0.5, semantically right but over-verbose); without a judge every correct item is exact
    n_exact: int = 0
    n_verbose: int = 0
    counts: dict[str, int]
    ids: dict[str, list[str]]
    # incorrect items whose non-empty answer says nothing was found (taxonomy.says_not_found): a
    # tag across the classes above, not a class; the paper's refusal is an empty response only
    says_not_found: list[str] = []

    def share(self, cls: str) -> float:
        return self.counts[cls] / self.n if self.n else 0.0
