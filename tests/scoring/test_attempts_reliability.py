"""pass^k, the per-task success rates and the consistency of answers (scoring/attempts.py), on
constructed attempts with the figures computed by hand in the comments."""

from __future__ import annotations

from itertools import combinations

import pytest

from deskbench.scoring.attempts import Attempt, attempt_metrics, pass_hat


def _rows() -> list[Attempt]:
    """k = 3. a: 1 0 1; b: 0 0 1; c: 1 (unscored) 1; d: 1 1 1 (answers per task in the comments)."""
    def at(task: str, scores: list[float | None], answers: list[str | None]) -> list[Attempt]:
        return [Attempt(task, i, s, answer=x) for i, (s, x) in enumerate(zip(scores, answers, strict=True))]

    return (at("a", [1.0, 0.0, 1.0], ["x", "x", "x"])  # the same answer every time
            + at("b", [0.0, 0.0, 1.0], ["x", "y", "x"])  # one answer differs
            + at("c", [1.0, None, 1.0], ["z", None, "z"])  # one answer unknown: out of consistency
            + at("d", [1.0, 1.0, 1.0], ["z", "z", "z"]))


def test_pass_hat_curve_solved_and_rates_by_hand() -> None:
    r = attempt_metrics(_rows(), 3).reliability
    # pass^1 per task: a 2/3, b 1/3, c 2/2, d 3/3 -> mean 3/4
    # pass^2: a C(2,2)/C(3,2) = 1/3, b C(1,2) = 0, c C(2,2)/C(2,2) = 1, d 1 -> (1/3 + 0 + 1 + 1) / 4 = 7/12
    # pass^3: c has 2 scored attempts, left out; a 0, b 0, d 1 -> 1/3
    assert r.curve == [pytest.approx(3 / 4), pytest.approx(7 / 12), pytest.approx(1 / 3)]
    assert r.pass_hat == pytest.approx(1 / 3) and r.success_rate == pytest.approx(3 / 4)
    assert r.n_tasks == 3 and r.solved == [0, 1, 1, 1]  # b 1 of 3, a 2 of 3, d 3 of 3; c incomplete
    assert [(t.task_id, t.n, t.successes) for t in r.tasks] == [("a", 3, 2), ("b", 3, 1), ("c", 2, 2), ("d", 3, 3)]
    assert r.tasks[0].rate == pytest.approx(2 / 3)
    assert (r.n_consistency, r.consistency) == (3, pytest.approx(2 / 3))  # a and d agree, b does not


def test_pass_hat_is_the_share_of_all_successful_draws() -> None:
    """C(c, k) / C(n, k) against every k-subset of n attempts counted by brute force."""
    for n in range(1, 7):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                draws = list(combinations(outcomes, k))
                assert pass_hat(n, c, k) == pytest.approx(sum(all(d) for d in draws) / len(draws))
    assert pass_hat(5, 3, 2) == pytest.approx(3 / 10)
    with pytest.raises(ValueError, match="pass\\^k needs"):
        pass_hat(2, 3, 1)


def test_a_success_is_the_tracks_correct_not_a_partial_score() -> None:
    """docqa's judged "partial" (0.5) is correct: with `correct` it succeeds; a bare score needs 1."""
    given = [Attempt("q", 0, 0.5, correct=True), Attempt("q", 1, 0.5, correct=True)]
    assert attempt_metrics(given, 2).reliability.pass_hat == 1.0
    assert attempt_metrics([("q", 0, 0.5), ("q", 1, 0.5)], 2).reliability.pass_hat == 0.0
    m = attempt_metrics([Attempt("q", 0, 1.0, correct=False), Attempt("q", 1, 1.0, correct=True)], 2)
    assert (m.passk, m.reliability.pass_hat, m.reliability.success_rate) == (1.0, 0.0, 0.5)


def test_one_attempt_has_no_consistency_and_pass_hat_is_accuracy() -> None:
    r = attempt_metrics([Attempt("a", 0, 1.0, answer="x"), Attempt("b", 0, 0.0, answer="y")], 1).reliability
    assert (r.pass_hat, r.consistency, r.n_consistency, r.solved) == (0.5, None, 0, [1, 1])


def test_attempts_beyond_k_and_unscored_tasks_are_left_out() -> None:
    r = attempt_metrics([Attempt("a", 0, 1.0), Attempt("a", 1, 1.0), Attempt("a", 2, 0.0),
                         Attempt("b", 0, None), Attempt("b", 1, None)], 2).reliability
    assert (r.pass_hat, r.n_tasks, [t.task_id for t in r.tasks]) == (1.0, 1, ["a"])
