"""The LDP generator (paper A.4, an integer linear program): its golden plan is the optimum of the
program the input files define (found again here by enumerating every integer plan, not by the
generator's solver), single by at least a dollar; the verifiers pass on the optimal plan and fail
on a feasible plan that earns less."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from deliverable_responses import LDP_INDUSTRIES, ldp_response, recompute

from deskbench.tracks.deliverables.generate.ldp import ldp_integer_program
from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers, verifier_pass_rate
from deskbench.tracks.deliverables.tasks import DeliverableTask, dump_task, load_package

SEEDS = range(6)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> list[DeliverableTask]:
    root = tmp_path_factory.mktemp("ldp")
    made = []
    for seed in SEEDS:
        pkg = root / f"ldp-{seed}"
        pkg.mkdir()
        task = ldp_integer_program(random.Random(seed), f"ldp-{seed}", pkg)
        (pkg / "task.yaml").write_text(dump_task(task), encoding="utf-8")
        made.append(load_package(pkg))
    return made


def _golden(t: DeliverableTask) -> tuple[tuple[float, ...], float]:
    gold = {g.name: g.value for g in t.golden.values}
    total = gold["max_contribution"]
    assert total is not None
    return tuple(float(gold[f"units_{i.lower()}"] or 0) for i in LDP_INDUSTRIES), total


def test_the_golden_plan_is_the_single_optimum_of_the_files_integer_program(packages: list[DeliverableTask]) -> None:
    decisions = set()
    for t in packages:
        assert t.directory is not None
        v = recompute(t, t.directory)
        units, total = _golden(t)
        assert units == v["right"]["units"] and total == pytest.approx(v["right"]["total"], abs=0.006)
        assert v["right"]["near"] == 1  # every other integer plan earns at least a dollar less
        assert t.golden.decision == f"DECISION: {v['decision']}"
        assert v["lures"]["default_assumption"]["total"] > total  # the relaxation is not integral
        decisions.add(v["decision"])
    assert decisions == {"GO", "NO GO"}  # both decisions among the six seeds


def _feasible(t: DeliverableTask, units: tuple[float, ...]) -> bool:
    """Whether `units` keeps within every department's hours, read from the files."""
    assert t.directory is not None
    from openpyxl import load_workbook

    times = list(load_workbook(t.directory / "vendor_time_per_unit.xlsx")["Time per Unit"].iter_rows(values_only=True))
    low = {(r[0], r[1]): min(r[2:]) for r in times[1:] if r and r[1]}
    cap: dict[str, float] = {}
    for dep, _sub, amount, unit in list(load_workbook(t.directory / "department_capacity.xlsx")["Sub-Activities"]
                                        .iter_rows(values_only=True))[1:]:
        cap[dep] = cap.get(dep, 0.0) + (amount / 60 if unit == "minutes" else amount)
    return all(sum(low[(i, dep)] * u for i, u in zip(LDP_INDUSTRIES, units, strict=True)) <= hours + 1e-9
               for dep, hours in cap.items())


def test_verifiers_pass_on_the_optimal_plan_and_fail_on_a_feasible_worse_one(
        packages: list[DeliverableTask], tmp_path: Path) -> None:
    for t in packages:
        assert t.directory is not None
        v = recompute(t, t.directory)
        units, total = _golden(t)
        right = ldp_response(t, units, total, v["decision"], tmp_path / t.id / "right")
        results = [r for r in run_verifiers(t.verifiers, right, tmp_path / t.id / "right") if not r.judged]
        assert [(r.id, r.evidence) for r in results if r.status != "pass"] == [], t.id
        assert verifier_pass_rate(results).v == 100.0

        most = max(range(len(units)), key=lambda i: units[i])  # one unit fewer of the largest line
        worse = tuple(u - 1 if i == most else u for i, u in enumerate(units))
        assert _feasible(t, worse) and _feasible(t, units)
        worse_total = v["right"]["total"] - _coefficients(t)[most]
        assert worse_total <= total - 1.0
        text = ldp_response(t, worse, worse_total, v["decision"], tmp_path / t.id / "worse")
        got = {r.id: r.status for r in run_verifiers(t.verifiers, text, tmp_path / t.id / "worse")}
        assert got["max_contribution"] == got["file_max_contribution"] == "fail", (t.id, got)
        assert got[f"units_{LDP_INDUSTRIES[most].lower()}"] == "fail"
        assert [k for k, s in got.items() if s == "fail"] == [
            "max_contribution", "file_max_contribution", f"units_{LDP_INDUSTRIES[most].lower()}"], got


def _coefficients(t: DeliverableTask) -> list[float]:
    """Contribution per unit (the mean of 2010-2013), read from the file."""
    assert t.directory is not None
    from openpyxl import load_workbook

    head, *rows = load_workbook(t.directory / "historical_contribution.xlsx")["Contribution per Unit"].iter_rows(
        values_only=True)
    cols = [i for i, h in enumerate(head) if str(h)[:4] in ("2010", "2011", "2012", "2013")]
    by = {r[0]: sum(r[i] for i in cols) / len(cols) for r in rows}
    return [by[i] for i in LDP_INDUSTRIES]


def test_each_trap_gives_its_own_maximum_and_its_verifiers_catch_it(
        packages: list[DeliverableTask], tmp_path: Path) -> None:
    for t in packages:
        assert t.directory is not None
        v = recompute(t, t.directory)
        assert {trap.kind for trap in t.traps} == set(v["lures"])
        for trap in t.traps:
            lure = v["lures"][trap.kind]
            out = tmp_path / t.id / trap.id
            text = ldp_response(t, lure["units"], lure["total"], lure["decision"], out)
            got = {r.id: r.status for r in run_verifiers(t.verifiers, text, out)}
            assert all(got[vid] == "fail" for vid in trap.verifiers), (t.id, trap.id, got)
            assert ("decision" in trap.verifiers) == (lure["decision"] != v["decision"])


def test_the_lp_relaxation_rounded_down_is_feasible_and_fails_where_it_is_not_the_optimum(
        packages: list[DeliverableTask], tmp_path: Path) -> None:
    """The shortcut the paper's Lazy AI Test names (no integer-programming library): solve the LP and
    round each unit count down. The plan is feasible; unless it happens to be the optimum, it earns
    a dollar or more less (the optimum is single by a dollar) and the verifiers say so."""
    import math

    checked = 0
    for t in packages:
        assert t.directory is not None
        v = recompute(t, t.directory)
        floored = tuple(float(math.floor(u + 1e-9)) for u in v["lures"]["default_assumption"]["units"])
        assert _feasible(t, floored)
        if floored == v["right"]["units"]:
            continue
        total = sum(u * c for u, c in zip(floored, _coefficients(t), strict=True))
        assert total <= v["right"]["total"] - 1.0
        out = tmp_path / t.id
        text = ldp_response(t, floored, total, v["decision"], out)
        got = {r.id: r.status for r in run_verifiers(t.verifiers, text, out)}
        assert got["max_contribution"] == got["file_max_contribution"] == "fail", (t.id, got)
        checked += 1
    assert checked >= 3  # the shortcut misses the optimum in most packages
