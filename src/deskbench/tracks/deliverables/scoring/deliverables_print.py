"""The deliverables summary drawn as rich tables (`print_summary`), apart from the code that computes it."""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import combinations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.models.prices import UNKNOWN
from deskbench.runs.protocol import describe
from deskbench.tracks.deliverables.scoring.deliverables_report import (
    CrossSystem,
    DeliverablesReport,
    MeanCI,
    Rate,
)
from deskbench.tracks.deliverables.scoring.failure_tags import tag_table
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import STAR_TARGETS
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES


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
    for system, peeks in report.peeking.items():  # no peeking (web_deny.py)
        console.print(f"no peeking, {escape(system)}: {escape(peeks.describe())}")
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
    for system, m in report.attempts.items():  # --attempts K > 1 (the tables above: attempt 0)
        console.print(f"attempts of {escape(system)} (k={m.k}, {m.n_tasks} tasks scored): VRS_0/100 pass@1 "
                      f"{fmt_pct(m.pass1)}, pass@{m.k} (best) {fmt_pct(m.passk)}, avg@{m.k} {fmt_pct(m.avgk)}"
                      + ("" if m.complete else f" (some tasks have fewer than {m.k} scored attempts)"))
        console.print(escape(m.reliability.line()) + " (a success: ACCEPT; an answer: the verifiers' outcomes)")


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
    for spear in cross.accept_spearman:
        t.add_row(spear.predictor, fmt(spear.pooled.rho, 3), fmt_p(spear.pooled.p), fmt_p(spear.p_bonferroni),
                  *(fmt(spear.by_system[s].rho, 3) for s in systems))
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
