"""The cross-system tables (Tables 9, 13-15, 17, 18, the VRS argmax, V-vs-rbar, §4.4) over the tasks graded for every system."""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import combinations

from deskbench.analysis.stats import (
    bonferroni,
    correlation_matrix,
    holm,
    mcnemar_exact,
    pearson_test,
    spearman,
)
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.deliverables_numbers import TIE, corr, num, reviewed_rate
from deskbench.tracks.deliverables.scoring.deliverables_report import (
    AcceptCorrelation,
    AcceptCount,
    ArgmaxWins,
    CrossSystem,
    McNemarRow,
    Sensitivity,
    SmeBest,
    SoleCause,
)
from deskbench.tracks.deliverables.scoring.vrs import GradedRow
from deskbench.tracks.deliverables.scoring.vrs_diagnostics import (
    sole_cause_summary,
    weight_sensitivity,
)
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES


def _or_nan(value: float | None) -> float:
    """A missing mean as NaN (what numpy made of None): the correlation is then NaN, as before."""
    return math.nan if value is None else value


def _sensitivity(rows: list[GradedRow], strict: bool) -> list[Sensitivity]:
    return [Sensitivity(weighting=r.weighting, mean_vrs={s: num(v) for s, v in r.mean_vrs.items()},
                        threshold=num(r.threshold), accepts=r.accepts, rule_accepts=r.rule_accepts,
                        split=r.split, jaccard=r.jaccard)
            for r in weight_sensitivity(rows, strict=strict)]


def cross_system(systems: list[str], task_ids: list[str],
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
            tied = [s for s in systems if vrs[s] >= top - TIE]
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
        return [float(i.graded_scores()[key]) for i in its]

    matrix = correlation_matrix({c: column(pooled, c) for c in RUBRIC_CODES}, method="pearson")
    accept_rows = []
    for key in ("V", *RUBRIC_CODES):
        accept_rows.append(AcceptCorrelation(
            predictor=key,
            pooled=corr(spearman(column(pooled, key), [float(bool(i.accept)) for i in pooled])),
            by_system={s: corr(spearman(column(items[s], key), [float(bool(i.accept)) for i in items[s]]))
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
        criterion_pearson={a: {b: num(r) for b, r in row.items()} for a, row in matrix.items()},
        v_rbar={s: corr(pearson_test([i.v for i in items[s]], [_or_nan(i.reasoning_mean) for i in items[s]]))
                for s in systems},
        v_rbar_pooled=corr(pearson_test([i.v for i in pooled], [_or_nan(i.reasoning_mean) for i in pooled])),
        accept_spearman=accept_rows,
        sole_cause=SoleCause(cleared_v=sc.cleared_v, all_at_least_2=sc.all_at_least_2,
                             accepted_all_at_least_2=sc.accepted_all_at_least_2, counts=sc.sole_cause,
                             total=sc.sole_cause_total, auto_rejected=sc.auto_rejected,
                             one_below_2_accepted=sc.one_below_2_accepted),
        sensitivity_relaxed=_sensitivity(rows, strict=False),
        sensitivity_strict=_sensitivity(rows, strict=True),
        sme_best=sme_best, reviewed=reviewed_rate(pooled),
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
        argmax = [s for s in systems if vrs[s] >= top - TIE]
        declared += 1
        tied += len(argmax) > 1
        if best[0] in argmax:
            agree += 1
        else:
            disagree.append(task)
    return SmeBest(declared=declared, agree=agree, share=agree / declared if declared else None, tied=tied,
                   conflicting=conflicting, undeclared=undeclared, disagree_tasks=disagree)
