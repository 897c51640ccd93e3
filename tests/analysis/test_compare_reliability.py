"""`compare`'s reliability across attempts (analysis/compare.py `reliability`): every system's pass^k
over the common tasks and the pairwise tests on "all k attempts correct", on constructed outcomes
with the figures computed by hand in the comments."""

from __future__ import annotations

import pytest

from deskbench.analysis.compare import SystemOutcomes, compare
from deskbench.analysis.stats import wilson_interval
from deskbench.runs.outcomes import ItemOutcome


def _system(label: str, marks: dict[str, str], answers: dict[str, str] | None = None) -> SystemOutcomes:
    """`marks`: per task one letter per attempt, C correct, W wrong, U unscored; `answers`: per task
    one letter per attempt, the answer given."""
    out = []
    for task, row in marks.items():
        for attempt, mark in enumerate(row):
            answer = answers[task][attempt] if answers else None
            out.append(ItemOutcome(task_id=task, attempt=attempt, system=label, status="scored",
                                   score=1.0 if mark == "C" else 0.0, correct=mark == "C", answer=answer)
                       if mark != "U" else
                       ItemOutcome(task_id=task, attempt=attempt, system=label, status="unscored", answer=answer))
    return SystemOutcomes(label=label, system=label, run_dir="run", outcomes=out)


A = _system("A", {"t1": "CCC", "t2": "CWC", "t3": "CCC", "t4": "CCC"},
            {"t1": "xxx", "t2": "xyx", "t3": "xxx", "t4": "zzz"})
# B ran a fourth attempt of every task: k is A's 3, so it is left out
B = _system("B", {"t1": "CCCC", "t2": "WWWC", "t3": "CCWC", "t4": "CCCC"})


def test_pass_hat_rows_and_pair_by_hand() -> None:
    r = compare([A, B], track="docqa", resamples=200).reliability
    assert r is not None and r.k == 3
    rows = {x.system: x for x in r.rows}
    # A: all three correct on t1, t3, t4 -> pass^3 = 3/4; B: t1, t4 -> 2/4
    assert (rows["A"].pass_hat, rows["B"].pass_hat) == (0.75, 0.5)
    assert [x.system for x in r.rows] == ["A", "B"]
    assert rows["A"].pass_hat_ci == pytest.approx(wilson_interval(3, 4))
    # A: pass@3 (best of 3) 1 on every task; avg@3 = (1 + 2/3 + 1 + 1) / 4 = 11/12, as its success rate
    assert (rows["A"].passk, rows["A"].avgk, rows["A"].success_rate) == (1.0, pytest.approx(11 / 12),
                                                                        pytest.approx(11 / 12))
    # pass^1, pass^2, pass^3 of B: t1 1,1,1; t2 0,0,0; t3 2/3, C(2,2)/C(3,2) = 1/3, 0; t4 1,1,1
    assert rows["B"].curve == [pytest.approx((2 + 2 / 3) / 4), pytest.approx((2 + 1 / 3) / 4), 0.5]
    assert rows["B"].solved == [1, 0, 1, 2] and rows["A"].solved == [0, 0, 1, 3]
    # answers: A agrees on t1, t3, t4, not on t2; B gave none
    assert (rows["A"].consistency, rows["A"].n_consistency) == (0.75, 4)
    assert (rows["B"].consistency, rows["B"].n_consistency) == (None, 0)
    (p,) = r.pairs
    # both all-correct: t1, t4; A only: t3; B only: none; neither: t2 -> exact McNemar p = 1 (1 discordant)
    assert (p.a, p.b, p.n_paired, p.both, p.a_only, p.b_only, p.neither) == ("A", "B", 4, 2, 1, 0, 1)
    assert p.mcnemar_p == 1.0 and p.p_holm == 1.0
    assert p.mean_diff == pytest.approx(0.25)


def test_unscored_attempts_leave_a_task_out_of_the_pair() -> None:
    c = _system("C", {"t1": "CUC", "t2": "WWW", "t3": "CCC", "t4": "CCC"})
    r = compare([A, c], track="docqa", resamples=200).reliability
    assert r is not None
    (p,) = r.pairs
    assert p.n_paired == 3  # t1: C has an unscored attempt
    row = next(x for x in r.rows if x.system == "C")
    # t1's pass^3 is unknown (2 scored attempts): pass^3 over t2, t3, t4 = 2/3; pass^2 over all four:
    # t1 C(2,2)/C(2,2) = 1, t2 0, t3 1, t4 1 -> 3/4
    assert row.n_tasks == 3 and row.pass_hat == pytest.approx(2 / 3) and row.curve[1] == 0.75


def test_no_reliability_when_a_system_ran_once() -> None:
    once = _system("D", {"t1": "C", "t2": "W", "t3": "C", "t4": "C"})
    c = compare([A, once], track="docqa", resamples=200)
    assert c.reliability is None
    assert any("no pass^k" in n for n in c.notes)
    held = compare([A, B], track="docqa", resamples=200)
    assert any("reliability table reads the first 3 attempts" in n for n in held.notes)
