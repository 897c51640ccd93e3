"""docqa's section of the report as data (tracks/docqa/report.py computes it): the MADQA Table 3
leaderboard grouped by task set, the Kuiper and step-budget curves, the error decomposition, the
breakdowns and the MADQA appendix analyses; the figures and the values its template marks best."""

from __future__ import annotations

from pydantic import BaseModel

from deskbench.report.models import SectionData
from deskbench.tracks.docqa.report_curves import BudgetCurve, ErrorBreakdown, KuiperCurve
from deskbench.tracks.docqa.report_madqa import MadqaAnalyses
from deskbench.tracks.docqa.scoring.docqa_summary import GroupSummary
from deskbench.tracks.docqa.scoring.oracle_gap import HumanOracleGap, OracleGap
from deskbench.tracks.docqa.scoring.retrieval import RetrievalReport
from deskbench.tracks.docqa.taxonomy import ERROR_CLASSES


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
    task_set: int = 0  # the TaskSet (DocqaSection.task_sets) it is ranked in
    retriever: str = "bm25"  # what its search ran on, from its configuration (search/retriever_use.py describe)


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


class SystemReport(BaseModel):
    row: LeaderboardRow
    kuiper_curve: KuiperCurve
    budget: BudgetCurve
    errors: ErrorBreakdown
    by_domain: dict[str, GroupSummary]
    by_category: dict[str, GroupSummary]
    # by the visual modality its question needs (MADQA E.3, Table 10), when `analyse modality` classified the run's
    by_modality: dict[str, GroupSummary] = {}
    retrieval: RetrievalReport | None = None  # deskbench's search diagnostics (scoring/retrieval.py)
    oracle_gap: OracleGap | None = None  # with an oracle on its model in its run (scoring/oracle_gap.py)


# Leaderboard columns marked when best (MADQA Table 3 bolds the best system): higher is better,
# except for Kuiper.
BEST_COLUMNS = {"accuracy": max, "cross_page": max, "cross_doc": max, "page_f1": max, "doc_f1": max, "kuiper": min}


class DocqaSection(SectionData):
    """Every docqa system of the report's runs (pooled humans one system with --pool-humans)."""

    systems: list[SystemReport]
    task_sets: list[TaskSet] = []  # the leaderboard's groups: systems that ran the same tasks
    accuracy_method: str  # how accuracy was decided, in words for the page
    judge: str | None = None  # the judge model, when accuracy was judged
    madqa: MadqaAnalyses | None = None  # the MADQA appendix sections
    madqa_oracle_gaps: list[HumanOracleGap] = []  # MADQA's Oracle Gap (§5), one per run with human-oracle answers

    @property
    def other_retrievers(self) -> bool:
        """Some system searched with another retriever than BM25: the leaderboard names each one's."""
        return any(s.row.retriever != "bm25" for s in self.systems)

    @property
    def has_injections(self) -> bool:
        return any(s.row.injection_affected for s in self.systems)

    def figures(self) -> dict[str, bytes]:
        from deskbench.tracks.docqa.report_madqa import madqa_pngs
        from deskbench.tracks.docqa.report_plots import budget_png, errors_png, kuiper_png

        out: dict[str, bytes] = {}
        if self.systems:
            out |= {"kuiper": kuiper_png([s.kuiper_curve for s in self.systems]),
                    "budget": budget_png([s.budget for s in self.systems]),
                    "errors": errors_png([s.errors for s in self.systems])}
        if self.madqa is not None:
            out |= {f"madqa_{name}": png for name, png in madqa_pngs(self.madqa).items()}
        return out

    def context(self) -> dict[str, object]:
        from deskbench.tracks.docqa.taxonomy import RULES, SAYS_NOT_FOUND_RULE

        breakdowns = [
            ("domain", "domain", sorted({g for s in self.systems for g in s.by_domain})),
            ("category", "category", sorted({g for s in self.systems for g in s.by_category})),
        ]
        if any(s.by_modality for s in self.systems):
            from deskbench.tracks.docqa.analysis.modality import CATEGORIES, UNCLASSIFIED

            breakdowns.append(("modality", "visual modality (MADQA E.3, Table 10)",
                               [g for g in (*CATEGORIES, UNCLASSIFIED) if any(g in s.by_modality for s in self.systems)]))
        best = {t.index: best_values(self, t.index) for t in self.task_sets} or {0: best_values(self)}
        return {"classes": ERROR_CLASSES, "rules": RULES, "not_found_rule": SAYS_NOT_FOUND_RULE,
                "breakdowns": breakdowns, "best": best}


def best_values(section: DocqaSection, task_set: int = 0) -> dict[str, float | None]:
    """The best value of each marked column among the systems of one task set (systems that ran
    other tasks are not ranked against them); None when fewer than two systems have one."""
    out: dict[str, float | None] = {}
    for column, pick in BEST_COLUMNS.items():
        values = [v for s in section.systems if s.row.task_set == task_set and (v := getattr(s.row, column)) is not None]
        out[column] = pick(values) if len(values) > 1 else None
    return out
