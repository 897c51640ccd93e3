"""The consulting paper's result tables (§4.1-4.11, Tables 6-18) over scored deliverables items.

`summarize` turns the per-episode scores of `deliverables.py` into one `DeliverablesReport`
(what `deskbench score RUN --json` prints; its model is deliverables_report.py, the cross-system
tables deliverables_cross.py) and `print_summary` (deliverables_print.py) draws it as rich tables.

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

from collections.abc import Sequence
from itertools import combinations

from deskbench.analysis.stats import cohens_d
from deskbench.models.prices import per, total_cost
from deskbench.runs.protocol import ProtocolNote, deskbench, paper
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.deliverables.scoring.deliverables_cross import cross_system
from deskbench.tracks.deliverables.scoring.deliverables_numbers import (
    TIE,
    mean,
    means_ci,
    num,
    rate,
    reviewed_rate,
)
from deskbench.tracks.deliverables.scoring.deliverables_print import fmt_pct
from deskbench.tracks.deliverables.scoring.deliverables_report import (
    ClassCell,
    ClassRow,
    CriterionStats,
    DeliverablesReport,
    PairD,
    Rate,
    StarMean,
    SystemRow,
    TrapCounts,
    UngradedItem,
)
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import STAR_TARGETS
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, DeliverableTask

NO_GRADES_NOTE = "no rubric grades: run `deskbench rubric grade` or `deskbench rubric import`"


def _criteria(graded: Sequence[DeliverableItemScore]) -> dict[str, CriterionStats]:
    out: dict[str, CriterionStats] = {}
    for code in RUBRIC_CODES:
        vals = [i.scores[code] for i in graded if i.scores is not None]
        out[code] = CriterionStats(
            n=len(vals), zeros=sum(v == 0 for v in vals), mean=mean([float(v) for v in vals]),
            pass_rate=sum(v >= 2 for v in vals) / len(vals) if vals else None)
    return out


def _stars(graded: Sequence[DeliverableItemScore]) -> dict[str, StarMean]:
    out = {}
    for t in STAR_TARGETS:
        vals = [float(i.stars[t]) for i in graded if t in i.stars]
        out[t] = StarMean(mean=mean(vals), n=len(vals))
    return out


def _system_row(system: str, items: list[DeliverableItemScore], task_ids: list[str],
                resamples: int, seed: int, reviewed: Rate | None = None) -> SystemRow:
    graded = [i for i in items if i.graded]
    figures = [i.figures() for i in graded]
    cols: dict[str, list[float]] = {
        "rbar": [f.rbar for f in figures],
        "vrs_strict": [f.vrs_strict for f in figures],
        "vrs_relaxed": [f.vrs_relaxed for f in figures],
    }
    v_all = [i.v for i in items]
    if len(graded) == len(items):  # V on the same items: one paired bootstrap for all four
        stats = means_ci({**cols, "v": v_all}, resamples, seed)
    else:
        stats = means_ci(cols, resamples, seed) | means_ci({"v": v_all}, resamples, seed)
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
        accept=rate(sum(bool(i.accept) for i in graded), len(graded)),
        auto_reject=rate(sum(bool(i.auto_reject) for i in graded), len(graded)),
        zeros=sum(c.zeros for c in criteria.values()),
        files=rate(sum(bool(i.files_ok) for i in needing), len(needing)),
        verifiers=sum(i.passed + i.failed + i.unobservable for i in items), unobservable=sum(i.unobservable for i in items),
        judged=sum(i.judged for i in items), cost_usd=cost, mean_cost_usd=per(cost, len(items)),
        cost_known=cost is not None,
        traps=traps, criteria=criteria, reviewed=reviewed if reviewed is not None else reviewed_rate(items),
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
            figures = [it.figures() for it in graded]
            rbars[s] = [f.rbar for f in figures]
            cells[s] = ClassCell(n=len(graded), vrs_strict=mean([f.vrs_strict for f in figures]),
                                 rbar=mean(rbars[s]))
        values = {s: c.vrs_strict for s, c in cells.items() if c.vrs_strict is not None}
        best = max(values.values()) if len(values) > 1 else None
        winners = [s for s, v in values.items() if best is not None and v >= best - TIE]
        pairs = [PairD(a=a, b=b, d=num(cohens_d(rbars[a], rbars[b])), n_a=len(rbars[a]), n_b=len(rbars[b]))
                 for a, b in combinations(systems, 2)]
        rows.append(ClassRow(prompt_class=cls, n_tasks=sum(c == cls for c in classes.values()),
                             cells=cells, winners=winners, cohens_d=pairs))
    return rows


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
    notes += [
        deskbench("SME-declared best (§4.4)", "the best column first, else 'Response N', 'Response - N' or 'RN' in "
                                             "the comments (the paper's regex), numbered as the grader saw the "
                                             "responses; a comment naming two responses, or comments naming "
                                             "different ones, declare nothing"),
        deskbench("QC checks (Appendix C)", "C.2's priority verifiers need an explicit confirm or edit before a "
                                           "row counts as reviewed; C.3 checks citations against the run's recorded "
                                           "sources (not the live web) and the citing sentence's figures; C.4 "
                                           "checks A-C flag by Table 19 wording, the reviewer decides"),
    ]
    return notes


def summarize(items: list[DeliverableItemScore], tasks: list[DeliverableTask], *,
              resamples: int = 1000, seed: int = 0, reviewed_only: bool = False) -> DeliverablesReport:
    """Tables 6-18 over `items` (attempt 0 of each system; see the module docstring for which
    items each table uses). `tasks` gives the task list (class sizes, tasks a system has no
    episode for); items of tasks not in it still count, with their own prompt class.
    `reviewed_only`: only QC-reviewed grades count; the others are listed as ungraded."""
    share_of = {s: reviewed_rate(i for i in items if i.system == s and i.attempt == 0) for s in {i.system for i in items}}
    pooled_share = reviewed_rate(i for i in items if i.attempt == 0)
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
        cross = cross_system(systems, task_ids, first)
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
