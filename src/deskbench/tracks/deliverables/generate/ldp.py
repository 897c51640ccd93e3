"""LDP as the paper's A.4 example: an integer linear program behind a Go / No-Go decision.

Four product industries (the units X1..X4 to make, integer and non-negative) share four
departments' hours. Nothing of the model is given directly: the hours per unit are the lowest
time across four vendors (vendor_time_per_unit.xlsx), the contribution per unit is the mean of
the 2010-2013 figures (historical_contribution.xlsx, with a 2009 column and a superseded draft
2014 budget beside them), and each department's hours are the sum of its sub-activities
(department_capacity.xlsx, where one sub-activity is stated in minutes). The golden plan and
maximum are what scipy.optimize.milp finds at generation time; a plan is kept only when it is
the single optimum by at least USD 1 (every other integer plan earns at least a dollar less),
so the verifiers on the units cannot fail a correct alternative answer.

Three traps, each moving the maximum by at least USD 2: the draft 2014 budget's contributions
taken instead of the 2010-2013 mean (a lower maximum: the draft is below the mean), minutes added
as hours (a higher one), and the LP relaxation reported without integer units (a higher one). The
decision is drawn per package: for Go the bar sits between the draft lure and the maximum, for No
Go between the maximum and the lower of the two higher lures, so falling into the trap(s) of that
side flips the decision.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from openpyxl import Workbook

from deskbench.generate.office import save_workbook
from deskbench.tracks.deliverables.generate.common import Package, lure_pattern
from deskbench.tracks.deliverables.tasks import DeliverableTask, Golden, GoldenValue, table19_rubric

INDUSTRIES = ("Aerospace", "Automotive", "Defense", "Electronics")
DEPARTMENTS = ("Drilling", "Milling", "Turning", "Assembly")
VENDORS = ("Vendor_abc", "Vendor_def", "Vendor_ghi", "Vendor_jkl")
SUB_ACTIVITIES = {
    "Drilling": ("Set-up", "Pilot drilling", "Deburring"),
    "Milling": ("Fixture loading", "Rough milling", "Finish milling"),
    "Turning": ("Chucking", "Rough turning", "Finish turning"),
    "Assembly": ("Kitting", "Fastening", "Final inspection"),
}
YEARS = (2010, 2011, 2012, 2013)  # the years the prompt averages
OUTPUT = "maximum_dollar_contribution_2014.docx"
SECTIONS = ["Model", "Optimal Plan", "Decision"]
MIN_GAP = 2.0  # USD: every lure's maximum is at least this far from the golden one
UNIQUE_BY = 1.0  # USD: every other integer plan earns at least this much less


@dataclass(frozen=True)
class Solution:
    """A plan (units per industry) and its total contribution."""

    units: tuple[float, ...]
    total: float


def solve(contribution: np.ndarray, hours: np.ndarray, capacity: np.ndarray, *, integral: bool = True) -> Solution:
    """max contribution . x subject to hours @ x <= capacity, x >= 0 (integer when `integral`),
    with scipy's HiGHS MILP solver (the LP relaxation when not integral)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(contribution)
    res = milp(-contribution, constraints=[LinearConstraint(hours, -np.inf, capacity)],
               integrality=np.ones(n) if integral else np.zeros(n), bounds=Bounds(0, np.inf))
    if not res.success or res.x is None:  # bounded and feasible by construction (x = 0)
        raise RuntimeError(f"the solver found no optimum: {res.message}")
    units = tuple(float(round(v)) if integral else float(v) for v in res.x)
    return Solution(units, float(np.dot(contribution, units)))


def single_optimum(contribution: np.ndarray, hours: np.ndarray, capacity: np.ndarray, best: Solution) -> bool:
    """No other integer plan comes within UNIQUE_BY of `best`: among the plans earning at least
    best - UNIQUE_BY, each industry's units have one value only (its min equals its max)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(contribution)
    near = [LinearConstraint(hours, -np.inf, capacity),
            LinearConstraint(contribution.reshape(1, -1), best.total - UNIQUE_BY + 1e-6, np.inf)]
    for i in range(n):
        for sense in (1.0, -1.0):
            c = np.zeros(n)
            c[i] = sense
            res = milp(c, constraints=near, integrality=np.ones(n), bounds=Bounds(0, np.inf))
            if not res.success or res.x is None or round(res.x[i]) != best.units[i]:
                return False
    return True


@dataclass(frozen=True)
class Draw:
    """One package's numbers: what the files say and what follows from them."""

    vendor_times: dict[tuple[str, str], list[int]]  # (industry, department) -> hours per vendor
    history: dict[str, dict[int, float]]  # industry -> year -> USD per unit (2009..2013)
    draft_2014: dict[str, float]
    sub_hours: dict[str, list[tuple[str, float, str]]]  # department -> (sub-activity, amount, unit)
    minutes_at: tuple[str, str]  # the sub-activity stated in minutes
    contribution: np.ndarray
    hours: np.ndarray  # department x industry, the lowest vendor time
    capacity: np.ndarray
    best: Solution
    lure_draft: Solution  # the draft 2014 budget's contributions
    lure_minutes: Solution  # minutes added as hours
    lure_relaxed: Solution  # no integer units


def _draw(rng: random.Random) -> Draw:
    ni, nd = len(INDUSTRIES), len(DEPARTMENTS)
    history = {ind: {y: round(rng.uniform(8, 40), 2) for y in (2009, *YEARS)} for ind in INDUSTRIES}
    contribution = np.array([sum(history[ind][y] for y in YEARS) / len(YEARS) for ind in INDUSTRIES])
    draft = {ind: round(float(contribution[i]) * rng.uniform(0.6, 0.85), 2) for i, ind in enumerate(INDUSTRIES)}
    hours = np.zeros((nd, ni))
    vendor_times: dict[tuple[str, str], list[int]] = {}
    for i, ind in enumerate(INDUSTRIES):
        unused = rng.randrange(nd)  # each product skips one department (a 0 in the paper's matrix)
        for d, dep in enumerate(DEPARTMENTS):
            if d == unused:
                vendor_times[(ind, dep)] = [0] * len(VENDORS)
                continue
            low = rng.randint(2, 7)
            times = [low + rng.randint(0, 4) for _ in VENDORS]
            times[rng.randrange(len(VENDORS))] = low
            vendor_times[(ind, dep)] = times
            hours[d, i] = low
    sub_hours: dict[str, list[tuple[str, float, str]]] = {}
    capacity = np.zeros(nd)
    lazy_capacity = np.zeros(nd)
    minutes_dep = DEPARTMENTS[rng.randrange(nd)]
    minutes_at = (minutes_dep, SUB_ACTIVITIES[minutes_dep][rng.randrange(3)])
    for d, dep in enumerate(DEPARTMENTS):
        rows: list[tuple[str, float, str]] = []
        for sub in SUB_ACTIVITIES[dep]:
            h = rng.randint(8, 40)
            if (dep, sub) == minutes_at:
                rows.append((sub, float(h * 60), "minutes"))
                lazy_capacity[d] += h * 60
            else:
                rows.append((sub, float(h), "hours"))
                lazy_capacity[d] += h
            capacity[d] += h
        sub_hours[dep] = rows
    best = solve(contribution, hours, capacity)
    return Draw(vendor_times=vendor_times, history=history, draft_2014=draft, sub_hours=sub_hours,
                minutes_at=minutes_at, contribution=contribution, hours=hours, capacity=capacity, best=best,
                lure_draft=solve(np.array([draft[ind] for ind in INDUSTRIES]), hours, capacity),
                lure_minutes=solve(contribution, hours, lazy_capacity),
                lure_relaxed=solve(contribution, hours, capacity, integral=False))


def _separated(d: Draw) -> bool:
    lures = (d.lure_draft.total, d.lure_minutes.total, d.lure_relaxed.total)
    return (all(abs(v - d.best.total) >= MIN_GAP for v in lures)
            and d.lure_draft.total < d.best.total < min(d.lure_minutes.total, d.lure_relaxed.total)
            and single_optimum(d.contribution, d.hours, d.capacity, d.best))


def _bar(rng: random.Random, low: float, high: float) -> int:
    """A whole-dollar bar in (low, high]: reached by `high`, not by `low`."""
    first, last = math.floor(low) + 1, math.floor(high)
    assert first <= last, (low, high)
    return rng.randint(first, last)


def _write_inputs(d: Draw, pkg: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = "Time per Unit"
    ws.append(["Product industry", "Department", *(f"{v} (hours per unit)" for v in VENDORS)])
    for ind in INDUSTRIES:
        for dep in DEPARTMENTS:
            ws.append([ind, dep, *d.vendor_times[(ind, dep)]])
    ws.append([])
    ws.append(["0 hours: the product does not pass through that department."])
    save_workbook(wb, pkg / "vendor_time_per_unit.xlsx")
    wb = Workbook()
    ws = wb.active
    ws.title = "Contribution per Unit"
    ws.append(["Product industry", *(f"{y} (USD/unit)" for y in (2009, *YEARS)), "2014 budget draft, superseded (USD/unit)"])
    for ind in INDUSTRIES:
        ws.append([ind, *(d.history[ind][y] for y in (2009, *YEARS)), d.draft_2014[ind]])
    save_workbook(wb, pkg / "historical_contribution.xlsx")
    wb = Workbook()
    ws = wb.active
    ws.title = "Sub-Activities"
    ws.append(["Department", "Sub-activity", "Available time", "Unit"])
    for dep in DEPARTMENTS:
        for sub, amount, unit in d.sub_hours[dep]:
            ws.append([dep, sub, int(amount), unit])
    save_workbook(wb, pkg / "department_capacity.xlsx")


def _plan_text(units: tuple[float, ...]) -> str:
    return ", ".join(f"{ind} {u:g}" for ind, u in zip(INDUSTRIES, units, strict=True))


def ldp_integer_program(rng: random.Random, task_id: str, pkg: Path) -> DeliverableTask:
    """An LDP package whose golden plan and maximum come from scipy's MILP solver (module doc)."""
    go = rng.random() < 0.5
    for _attempt in range(10_000):  # redraw until the optimum is single and every lure is 2 USD off
        draw = _draw(rng)
        if _separated(draw):
            break
    else:
        raise RuntimeError("could not draw an integer program whose lures are apart from its optimum")
    best, draft, minutes, relaxed = draw.best, draw.lure_draft, draw.lure_minutes, draw.lure_relaxed
    bar = _bar(rng, draft.total, best.total) if go else _bar(rng, best.total, min(minutes.total, relaxed.total))
    assert (best.total >= bar) == go
    verdict, other = ("GO", "NO GO") if go else ("NO GO", "GO")
    decision = f"DECISION: {verdict}"
    _write_inputs(draw, pkg)

    label = "Maximum total contribution"
    p = Package()
    p.output(OUTPUT, "docx", SECTIONS)
    v_total = p.verify("numeric", "max_contribution", "Maximum total 2014 contribution (USD, the MILP optimum)",
                       label=label, expected=round(best.total, 2), abs_tol=0.5)
    v_file = p.verify("numeric", "file_max_contribution", f"The maximum as {OUTPUT} states it",
                      file=OUTPUT, label=label, expected=round(best.total, 2), abs_tol=0.5)
    for ind, u in zip(INDUSTRIES, best.units, strict=True):
        p.verify("numeric", f"units_{ind.lower()}", f"{ind} units in the optimal plan (integer)",
                 label=f"{ind} units", expected=u, abs_tol=0.0)
    v_dec = p.verify("decision_line", "decision", "Exact decision line", expected=decision)
    v_draft = p.verify("regex_absent", "no_draft_budget", "The maximum is not the one with the draft 2014 "
                       "budget's contributions", pattern=lure_pattern(label, draft.total, 0))
    v_min = p.verify("regex_absent", "no_minutes_as_hours", "The maximum is not the one with minutes added as "
                     "hours", pattern=lure_pattern(label, minutes.total, 0))
    v_rel = p.verify("regex_absent", "no_lp_relaxation", "The maximum is not the LP relaxation's",
                     pattern=lure_pattern(label, relaxed.total, 0))
    p.verify("citation_domains", "no_external_citations", "Closed corpus: no external URL cited", allowed=[])
    p.verify("llm_check", "formulation_stated", "Judged", criterion="States the integer program: one integer, "
             "non-negative decision variable per industry, an objective built from the averaged contributions, "
             "and one hours constraint per department.")

    def lure(s: Solution) -> str:
        flips = (s.total >= bar) != go
        return f"{label} USD {s.total:,.2f} (plan {_plan_text(s.units)})" + (f", DECISION: {other}" if flips else "")

    dec_low = [v_dec] if go else []  # the lower lure flips Go; the higher lures flip No Go
    dec_high = [] if go else [v_dec]
    dep, sub = draw.minutes_at
    p.trap("draft_2014_budget", "stale_placeholder", "The 2014 contribution per unit is the mean of 2010-2013; "
           f"the superseded draft 2014 budget beside it gives a maximum of USD {draft.total:,.2f} instead of "
           f"{best.total:,.2f}.", lure=lure(draft), location="historical_contribution.xlsx, the draft 2014 column",
           verifiers=[v_total, v_file, v_draft, *dec_low])
    p.trap("minutes_as_hours", "unit_mismatch", f"{dep} / {sub} is stated in minutes; added as hours it "
           f"inflates the {dep} budget and the maximum to USD {minutes.total:,.2f}.",
           lure=lure(minutes), location=f"department_capacity.xlsx Sub-Activities ({dep}, {sub})",
           verifiers=[v_total, v_file, v_min, *dec_high])
    p.trap("integer_units", "default_assumption", "Units must be whole: the LP relaxation's fractional plan "
           f"gives USD {relaxed.total:,.2f}, above the integer optimum.",
           lure=lure(relaxed), location="the prompt's integrality rule", verifiers=[v_total, v_file, v_rel, *dec_high])

    caps = ", ".join(f"{dep} {c:g} h" for dep, c in zip(DEPARTMENTS, draw.capacity, strict=True))
    coefs = ", ".join(f"{ind} {c:.4f}" for ind, c in zip(INDUSTRIES, draw.contribution, strict=True))
    verdict_word = "Go" if go else "No Go"
    return DeliverableTask(
        id=task_id, title="Maximum dollar contribution 2014 (integer program)", prompt_class="LDP",
        corpus_discipline="closed",
        prompt="A metal-fabrication firm makes products for four industries (Aerospace, Automotive, Defense, "
        "Electronics); every product passes through up to four departments (Drilling, Milling, Turning, Assembly), "
        "made with one of four vendors. The CEO wants the maximum total contribution the portfolio can earn in "
        "2014 and a Go / No-Go decision. Take each product's production time per department from "
        "vendor_time_per_unit.xlsx, choosing the minimum time across vendors; the 2014 contribution per unit of "
        "each industry from historical_contribution.xlsx, as the average of 2010, 2011, 2012 and 2013; and each "
        "department's maximum hours from department_capacity.xlsx, as the sum of its sub-activities. Build the "
        "model that maximises total contribution (units times contribution per unit, summed over industries); "
        "unit counts must be integer and non-negative. Use only the files provided, no web. The minimum total "
        f"contribution to qualify as Go is USD {bar}. Report '{label}: USD x' (rounded to the nearest dollar) "
        "and the plan as 'Aerospace units: n', 'Automotive units: n', 'Defense units: n', 'Electronics units: "
        f"n'. Write {OUTPUT} with sections {', '.join(SECTIONS)}. End with `DECISION: GO` or `DECISION: NO GO`.",
        inputs=["vendor_time_per_unit.xlsx", "historical_contribution.xlsx", "department_capacity.xlsx"],
        required_outputs=p.outputs,
        golden=Golden(answer=f"Maximum total contribution USD {best.total:,.2f} with {_plan_text(best.units)} "
                      f"{'>=' if go else '<'} the bar of USD {bar}: {verdict_word}.", decision=decision,
                      values=[GoldenValue(name="max_contribution", value=round(best.total, 2), abs_tol=0.5),
                              *(GoldenValue(name=f"units_{ind.lower()}", value=u, abs_tol=0.0)
                                for ind, u in zip(INDUSTRIES, best.units, strict=True))]),
        solution_logic=["Hours per unit: the lowest vendor time for each (industry, department).",
                        f"Contribution per unit: the mean of {', '.join(map(str, YEARS))}: {coefs} USD.",
                        f"Department hours: the sum of the sub-activities, {dep} / {sub} converted from minutes: "
                        f"{caps}.",
                        "Maximise sum(c_i x_i) subject to the four hours constraints, x_i integer >= 0 "
                        f"(scipy.optimize.milp): {_plan_text(best.units)}, USD {best.total:,.2f}.",
                        f"USD {best.total:,.2f} vs the bar of USD {bar} -> {verdict_word}."],
        lazy_ai_test=f"Takes the draft 2014 budget (USD {draft.total:,.2f}), adds the minutes as hours "
        f"(USD {minutes.total:,.2f}) or reports the LP relaxation (USD {relaxed.total:,.2f}), and says "
        f"{'No Go' if go else 'Go'}.",
        expert_test=f"Derives every coefficient from the files, solves the integer program and says {verdict_word}.",
        traps=p.traps, verifiers=p.specs(), rubric=table19_rubric(),
    )
