"""Bias correction for an LLM judge: Rogan-Gladen (MADQA F.1 eq. 9), after Lee et al. (2026),
"How to Correctly Report LLM-as-a-Judge Evaluations" (arXiv 2511.21140).

A judge with specificity q0 (says "incorrect" when a human would) and sensitivity q1 (says "correct"
when a human would) reports an accuracy p that is biased towards 1/2; theta = (p + q0 - 1) /
(q0 + q1 - 1) recovers the accuracy a human would give. The defaults are the paper's measurement on
200 human-labelled items: q0 = 1.000 on 48 human-incorrect, q1 = 0.980 on 152 human-correct.
Intervals account for the test sample (n) and for the calibration samples (m0, m1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

Q0 = 1.000
Q1 = 0.980
M0 = 48
M1 = 152


@dataclass(frozen=True)
class Interval:
    """A confidence interval [low, high]."""

    low: float
    high: float


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def _check_informative(q0: float, q1: float) -> None:
    """q0 + q1 <= 1 means the judge is no better than a coin flip (or inverted): no correction."""
    if q0 + q1 <= 1:
        raise ValueError(
            f"judge specificity q0={q0:g} plus sensitivity q1={q1:g} must exceed 1 "
            "(a judge no better than chance cannot be corrected)"
        )


def _z(alpha: float) -> float:
    return float(NormalDist().inv_cdf(1 - alpha / 2))


def rogan_gladen(p: float, q0: float = Q0, q1: float = Q1) -> float:
    """Bias-corrected accuracy from the judge's raw accuracy p, clipped to [0, 1]
    (sampling noise can push the unclipped estimate past either end)."""
    _check_informative(q0, q1)
    return _clip((p + q0 - 1) / (q0 + q1 - 1))


def _plug_in_se(p: float, n: float, q0: float, q1: float, m0: float, m1: float, theta: float) -> float:
    """Delta-method standard error of the Rogan-Gladen estimate: the variance of p (n test items)
    and of q0, q1 (m0, m1 calibration items), divided through by the judge's informedness."""
    variance = p * (1 - p) / n + (1 - theta) ** 2 * q0 * (1 - q0) / m0 + theta**2 * q1 * (1 - q1) / m1
    return math.sqrt(variance) / (q0 + q1 - 1)


def rg_interval_simple(
    p: float,
    n: int,
    q0: float = Q0,
    q1: float = Q1,
    m0: int = M0,
    m1: int = M1,
    alpha: float = 0.05,
) -> Interval:
    """Plain delta-method (Wald) interval around the unclipped Rogan-Gladen estimate, adding the
    variance of p (n items) and of q0, q1 (m0, m1 calibration items). Under-covers near 0 and 1
    and with q0 or q1 = 1 (zero estimated variance); see `rg_interval_lee`."""
    _check_informative(q0, q1)
    z = _z(alpha)
    theta = (p + q0 - 1) / (q0 + q1 - 1)
    se = _plug_in_se(p, n, q0, q1, m0, m1, theta)
    return Interval(_clip(theta - z * se), _clip(theta + z * se))


def rg_interval_lee(
    p: float,
    n: int,
    q0: float = Q0,
    q1: float = Q1,
    m0: int = M0,
    m1: int = M1,
    alpha: float = 0.05,
) -> Interval:
    """Lee et al.'s adjusted interval: add-z^2/2 (Agresti-Coull style) to p, add-one-per-class to
    q0 and q1, and a bias shift dth, so that coverage holds near the boundaries and with q = 1."""
    _check_informative(q0, q1)
    z = _z(alpha)
    z2 = z * z
    p_ = (n * p + z2 / 2) / (n + z2)
    q0_ = (m0 * q0 + 1) / (m0 + 2)
    q1_ = (m1 * q1 + 1) / (m1 + 2)
    _check_informative(q0_, q1_)  # smoothing can, in a corner case, undo q0 + q1 > 1
    n_, m0_, m1_ = n + z2, m0 + 2, m1 + 2
    theta = (p_ + q0_ - 1) / (q0_ + q1_ - 1)
    shift = 2 * z2 * (-(1 - theta) * q0_ * (1 - q0_) / m0_ + theta * q1_ * (1 - q1_) / m1_)
    se = _plug_in_se(p_, n_, q0_, q1_, m0_, m1_, theta)
    return Interval(_clip(theta + shift - z * se), _clip(theta + shift + z * se))


def rg_interval_official(
    p: float,
    n: int,
    q0: float = Q0,
    q1: float = Q1,
    m0: int = M0,
    m1: int = M1,
    alpha: float = 0.05,
) -> Interval:
    """The official MADQA evaluator's interval (eval/metrics.py `confidence_interval`): when the
    calibration is good (q0 + q1 > 1.9) it trusts q0 and q1 and widens only the test sample's
    binomial interval, theta +- z sqrt(p(1-p)/n) / (q0 + q1 - 1); otherwise Lee et al.'s interval.
    Narrower than `rg_interval_lee` (it ignores the calibration samples' uncertainty), so it is
    the --official choice, not the default."""
    _check_informative(q0, q1)
    if q0 + q1 > 1.9:
        z = _z(alpha)
        theta = rogan_gladen(p, q0, q1)
        se = (math.sqrt(p * (1 - p) / n) if n > 0 else 0.0) / (q0 + q1 - 1)
        return Interval(_clip(theta - z * se), _clip(theta + z * se))
    return rg_interval_lee(p, n, q0, q1, m0, m1, alpha)


def estimate_q(labels: Sequence[tuple[bool, bool]]) -> tuple[float, float, int, int]:
    """(q0, q1, m0, m1) from (human_correct, judge_correct) pairs: q0 = share of human-incorrect
    items the judge also calls incorrect, q1 = share of human-correct items it calls correct."""
    m0 = sum(1 for human, _ in labels if not human)
    m1 = sum(1 for human, _ in labels if human)
    if m0 == 0 or m1 == 0:
        missing = "incorrect" if m0 == 0 else "correct"
        raise ValueError(
            f"no item that a human judged {missing}: q0 and q1 need both kinds of calibration item"
        )
    agree0 = sum(1 for human, judge in labels if not human and not judge)
    agree1 = sum(1 for human, judge in labels if human and judge)
    return agree0 / m0, agree1 / m1, m0, m1
