"""The item-analysis reports `deskbench analyse items | splits | agreement` write (MADQA Appendix D,
H.4): the pydantic models are the JSON reports' schema; the numbers come from items, splits and
agreement over a response matrix. Kept out of the CLI module so the command line starts without
numpy and pydantic."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from deskbench.tracks.docqa.analysis.agreement import CORRECT_AT, kappa_matrix, outcome_table
from deskbench.tracks.docqa.analysis.items import difficulty, discrimination
from deskbench.tracks.docqa.analysis.judged import AnalysisScoring, Judging
from deskbench.tracks.docqa.analysis.matrix import ResponseMatrix, load_matrix
from deskbench.tracks.docqa.analysis.splits import (
    SENTINEL_FRACTION,
    build_splits,
    difficulty_bin,
    is_sentinel,
    ranking_agreement,
    system_means,
)
from deskbench.tracks.docqa.humans import is_human


def matrix_of(run_dirs: list[Path], pool: bool, judging: Judging | None = None) -> ResponseMatrix:
    return load_matrix(run_dirs, pool_humans=pool, judging=judging)


def _num(x: float) -> float | None:
    """JSON has no NaN: an undefined statistic is written as null."""
    return None if math.isnan(x) else float(x)


# -- items ----------------------------------------------------------------------------------


class ItemStat(BaseModel):
    id: str
    difficulty: float | None  # p_j, mean accuracy over systems
    discrimination: float | None  # corrected point-biserial r_j; null when undefined
    sentinel: bool  # p_j <= 0.1
    bin: int | None  # 0..8 for 0.1 < p <= 0.2 ... 0.9 < p <= 1.0


class ItemsReport(BaseModel):
    systems: list[str]
    system_accuracy: list[float | None]
    n_items: int
    items: list[ItemStat]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def items_report(rm: ResponseMatrix) -> ItemsReport:
    p, r = difficulty(rm.values), discrimination(rm.values)
    stats = [ItemStat(id=i, difficulty=_num(p[j]), discrimination=_num(r[j]), sentinel=is_sentinel(p[j]),
                      bin=difficulty_bin(p[j])) for j, i in enumerate(rm.items)]
    return ItemsReport(systems=rm.systems, system_accuracy=[_num(x) for x in system_means(rm.values)],
                       n_items=len(rm.items), items=stats)


# -- splits ---------------------------------------------------------------------------------


class SplitSummary(BaseModel):
    n: int
    n_sentinel: int
    mean_difficulty: float | None
    mean_discrimination: float | None  # over items with a defined r
    spearman_vs_full: float | None  # rank agreement of systems: this split vs all common items


class SplitsReport(BaseModel):
    seed: int
    sentinel_fraction: float
    n_items: int
    sentinel_pool: int
    systems: list[str]
    test: list[str]
    dev: list[str]
    train: list[str]
    summary: dict[str, SplitSummary]
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def _nanmean(x: npt.NDArray[np.float64]) -> float | None:
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else None


def splits_report(rm: ResponseMatrix, n_test: int, n_dev: int, seed: int, n_train: int | None = None,
                  sentinel_fraction: float = SENTINEL_FRACTION) -> SplitsReport:
    p, r = difficulty(rm.values), discrimination(rm.values)
    sp = build_splits(p, r, n_test, n_dev, seed=seed, n_train=n_train, sentinel_fraction=sentinel_fraction)
    summary = {}
    for name, cols in (("test", sp.test), ("dev", sp.dev), ("train", sp.train)):
        idx = np.array(cols, dtype=np.int64)
        summary[name] = SplitSummary(
            n=len(cols), n_sentinel=sum(is_sentinel(p[j]) for j in cols),
            mean_difficulty=_nanmean(p[idx]), mean_discrimination=_nanmean(r[idx]),
            spearman_vs_full=_num(ranking_agreement(rm.values, cols)) if cols else None,
        )
    return SplitsReport(seed=seed, sentinel_fraction=sentinel_fraction, n_items=len(rm.items),
                        sentinel_pool=len(sp.sentinel_pool), systems=rm.systems,
                        test=[rm.items[j] for j in sp.test], dev=[rm.items[j] for j in sp.dev],
                        train=[rm.items[j] for j in sp.train], summary=summary)


# -- agreement ------------------------------------------------------------------------------


class AgreementPair(BaseModel):
    a: str
    b: str
    kappa: float | None
    n_items: int
    both_correct: int
    only_a: int
    only_b: int
    neither: int


class AgreementReport(BaseModel):
    systems: list[str]
    humans: list[str]  # the rows that are people (human:NAME, or the pooled human)
    correct_at: float  # accuracy >= this counts as correct
    kappa: list[list[float | None]]  # systems x systems; null when undefined
    n_items: list[list[int]]  # items both systems were scored on
    pairs: list[AgreementPair]  # every unordered pair, with who solved what
    scoring: AnalysisScoring | None = None  # what decided correctness (set by the command)


def agreement_report(rm: ResponseMatrix) -> AgreementReport:
    kappas, counts = kappa_matrix(rm.values)
    pairs = []
    for i, j in itertools.combinations(range(len(rm.systems)), 2):
        both, only_a, only_b, neither = outcome_table(rm.values[i], rm.values[j])
        pairs.append(AgreementPair(a=rm.systems[i], b=rm.systems[j], kappa=_num(kappas[i, j]),
                                   n_items=int(counts[i, j]), both_correct=both, only_a=only_a,
                                   only_b=only_b, neither=neither))
    return AgreementReport(systems=rm.systems, humans=[s for s in rm.systems if is_human(s)],
                           correct_at=CORRECT_AT, kappa=[[_num(x) for x in row] for row in kappas],
                           n_items=[[int(c) for c in row] for row in counts], pairs=pairs)
