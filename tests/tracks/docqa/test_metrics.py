"""Metric functions against hand-computed values (arithmetic in the comments) and, for ANLS*,
against the reference `anls-star` package on random cases."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from anls_star import anls_score

from deskbench.analysis.stats import bootstrap_mean_ci, bootstrap_means_ci, wilson_interval
from deskbench.tracks.docqa.scoring.answer import (
    ANLS_THRESHOLD,
    anls_correct,
    anls_star,
    exact_match,
    normalize_answer,
)
from deskbench.tracks.docqa.scoring.attribution import doc_f1, f1, page_f1
from deskbench.tracks.docqa.scoring.bias import (
    M0,
    M1,
    Q0,
    Q1,
    Interval,
    estimate_q,
    rg_interval_lee,
    rg_interval_simple,
    rogan_gladen,
)
from deskbench.tracks.docqa.scoring.calibration import (
    KuiperResult,
    effort_share_incorrect,
    kuiper,
    wasted_effort_ratio,
)

# --- answers: normalisation and exact match ---------------------------------------------------


def test_normalize_answer() -> None:
    assert normalize_answer("  New   York\tCity \n") == "new york city"
    assert normalize_answer("") == ""
    assert normalize_answer(" \t ") == ""
    assert normalize_answer("ABC") == "abc"


def test_exact_match_is_order_free_and_counts_duplicates() -> None:
    assert exact_match(["B", " a "], [["a", "b"]])
    assert exact_match(["a", "a", "b"], [["a", "b", "a"]])
    assert not exact_match(["a", "a"], [["a"]])  # a duplicate is an extra item
    assert not exact_match(["a"], [["a", "a"]])  # ... and a missing one
    assert exact_match(["x"], [["y"], ["X"]])  # any variant will do
    assert not exact_match(["x"], [])  # no gold: nothing to match
    assert exact_match([], [[]])  # an empty answer where none is expected


def test_bare_strings_are_refused() -> None:
    with pytest.raises(TypeError):
        anls_star("abc", [["abc"]])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        exact_match(["abc"], ["abc"])  # type: ignore[list-item]


# --- answers: ANLS* by hand ---------------------------------------------------------------------


def test_anls_single_strings() -> None:
    # "abcd" -> "abce": 1 substitution over max(4, 4) chars: 1 - 1/4 = 0.75
    assert anls_star(["abce"], [["abcd"]]) == pytest.approx(0.75)
    # "abcdef" -> "abcxyz": 3 of 6 chars differ: 1 - 3/6 = 0.5, exactly the threshold: kept
    assert anls_star(["abcxyz"], [["abcdef"]]) == 0.5
    # "abcdef" -> "abwxyz": 4 of 6: 1 - 4/6 = 0.333 < 0.5 -> 0
    assert anls_star(["abwxyz"], [["abcdef"]]) == 0.0
    # case and whitespace are normalised away before the distance: 1.0
    assert anls_star(["  NEW   york "], [["new york"]]) == 1.0
    # "abc" vs "abcdef": 3 insertions over max(3, 6): 1 - 3/6 = 0.5
    assert anls_star(["abc"], [["abcdef"]]) == 0.5
    # two empty strings are identical; empty vs "ab" is 2 edits of 2: 0
    assert anls_star([""], [[""]]) == 1.0
    assert anls_star([""], [["ab"]]) == 0.0


def test_anls_lists() -> None:
    # reordering is free (Hungarian matching): 2 perfect pairs / 2 = 1.0
    assert anls_star(["London", "Paris"], [["paris", "london"]]) == 1.0
    # one of three gold items missing: (1 + 1) / max(3, 2) = 2/3
    assert anls_star(["a", "b"], [["a", "b", "c"]]) == pytest.approx(2 / 3)
    # one hallucinated item: (1 + 1 + 0) / max(2, 3) = 2/3
    assert anls_star(["alpha", "beta", "zzzzz"], [["alpha", "beta"]]) == pytest.approx(2 / 3)
    # a near miss inside a list: "abcd"/"abce" = 0.75, "xyz"/"xyz" = 1: (0.75 + 1) / 2 = 0.875
    assert anls_star(["xyz", "abce"], [["abcd", "xyz"]]) == pytest.approx(0.875)
    # duplicates: gold ["a", "a"], pred ["a"]: one pair matched: 1 / 2 = 0.5
    assert anls_star(["a"], [["a", "a"]]) == 0.5


def test_anls_comma_joined_answer() -> None:
    # "a, b" is one string of 4 chars; against "a" or "b": 3 edits of 4 -> 0.25 < 0.5 -> 0;
    # the best single pair is 0, divided by max(2, 1): 0.0
    assert anls_star(["a, b"], [["a", "b"]]) == 0.0
    # "international business machines, ibm" (31 + 5 = 36 chars) vs the 31-char first item:
    # 5 insertions: 1 - 5/36 = 31/36; the second gold item is unmatched: (31/36) / 2 = 31/72
    joined = ["international business machines, ibm"]
    assert anls_star(joined, [["international business machines", "ibm"]]) == pytest.approx(31 / 72)


def test_anls_max_over_variants() -> None:
    # "abcdefgx" vs "abcdefgh": 1 edit of 8 -> 0.875; vs "abcdxxxx": 3 edits of 8 -> 0.625
    assert anls_star(["abcdefgx"], [["abcdxxxx"], ["abcdefgh"]]) == pytest.approx(0.875)
    # a one-item variant beats a two-item one: [["a", "b"], ["a"]] with pred ["a"] -> 1.0
    assert anls_star(["a"], [["a", "b"], ["a"]]) == 1.0


def test_anls_empty_pred_and_empty_gold() -> None:
    assert anls_star([], [["a"]]) == 0.0  # nothing answered: 0 / max(1, 0)
    assert anls_star([], [[]]) == 1.0  # empty vs empty list: 1.0 (ANLS*'s convention)
    assert anls_star(["a"], [[]]) == 0.0  # hallucinated item against an empty variant
    # No variant at all (no gold): the reference raises, deskbench scores 0.
    assert anls_star(["a"], []) == 0.0
    with pytest.raises(ValueError):
        anls_score((), ["a"])


def test_anls_correct_threshold() -> None:
    assert ANLS_THRESHOLD == 0.5
    assert anls_correct(0.5)
    assert not anls_correct(0.4999)
    assert anls_correct(1.0)


# --- answers: ANLS* against the reference package -----------------------------------------------

_ALPHABET = "abcde fgAB"


def _reference(pred: list[str], variants: list[list[str]]) -> float:
    """The `anls-star` package: variants as a tuple (1-of-n), each variant and pred as lists."""
    return anls_score(
        tuple(list(v) for v in variants), list(pred), return_gt=False, return_key_scores=False
    )


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 9)))


def _edit(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(0, 3)):
        op = rng.randint(0, 2)
        if op == 0 or not chars:
            chars.insert(rng.randint(0, len(chars)), rng.choice(_ALPHABET))
        elif op == 1:
            chars.pop(rng.randrange(len(chars)))
        else:
            chars[rng.randrange(len(chars))] = rng.choice(_ALPHABET)
    if rng.random() < 0.2:
        return f"  {''.join(chars).upper()} "
    return "".join(chars)


def _case(rng: random.Random) -> tuple[list[str], list[list[str]]]:
    base = [_word(rng) for _ in range(rng.randint(0, 4))]
    variants = [
        [_edit(rng, w) for w in rng.sample(base, rng.randint(0, len(base)))]
        for _ in range(rng.randint(1, 3))
    ]
    pred = [_edit(rng, w) for w in rng.sample(base, rng.randint(0, len(base)))]
    pred += [_word(rng) for _ in range(rng.randint(0, 1))]  # sometimes a hallucinated item
    rng.shuffle(pred)
    return pred[:4], variants


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_anls_star_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        pred, variants = _case(rng)
        ours = anls_star(pred, variants)
        reference = _reference(pred, variants)
        assert abs(ours - reference) < 1e-9, (pred, variants, ours, reference)


def test_anls_star_equals_reference_on_long_lists() -> None:
    # lists of 5-7 items take the scipy assignment path rather than trying every matching
    rng = random.Random(11)
    for _ in range(40):
        base = [_word(rng) for _ in range(rng.randint(5, 7))]
        gold = [_edit(rng, w) for w in base]
        pred = [_edit(rng, w) for w in rng.sample(base, rng.randint(4, len(base)))]
        reference = _reference(pred, [gold])
        assert abs(anls_star(pred, [gold]) - reference) < 1e-9, (pred, gold)


# --- attribution --------------------------------------------------------------------------------


def test_page_f1_perfect_and_partial() -> None:
    assert page_f1([("d", 1), ("d", 2)], [("d", 2), ("d", 1)]) == 1.0
    # 3 pages cited, 2 gold, 1 of them cited: P = 1/3, R = 1/2,
    # F1 = 2 * (1/3 * 1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 2/5 = 0.4
    cited = [("d", 1), ("d", 5), ("e", 3)]
    assert page_f1(cited, [("d", 1), ("d", 2)]) == pytest.approx(0.4)


def test_page_f1_duplicates_counted_once() -> None:
    # unique cited {1, 2}: P = 1/2, R = 1/1, F1 = 2 * 0.5 / 1.5 = 2/3
    # (counting the repeat, P would be 2/3 and F1 0.8)
    assert page_f1([("d", 1), ("d", 1), ("d", 2)], [("d", 1)]) == pytest.approx(2 / 3)
    assert page_f1([("d", 1), ("d", 1)], [("d", 1)]) == 1.0


def test_f1_edge_cases() -> None:
    assert page_f1([], [("d", 1)]) == 0.0  # no citation
    assert page_f1([("d", 1)], []) == 0.0  # no gold: cannot be scored as correct
    assert page_f1([("d", 1)], [("d", 2)]) == 0.0  # P = R = 0
    assert f1({"x", "y"}, ["y"]) == pytest.approx(2 / 3)  # any hashable unit


def test_doc_f1_forgives_the_page() -> None:
    cited = [("a.pdf", 1), ("b.pdf", 5)]
    gold = [("a.pdf", 2), ("b.pdf", 6)]
    assert page_f1(cited, gold) == 0.0
    assert doc_f1(cited, gold) == 1.0
    # docs {a, c} vs {a, b}: P = 1/2, R = 1/2, F1 = 1/2
    assert doc_f1([("a.pdf", 1), ("c.pdf", 1), ("c.pdf", 2)], gold) == pytest.approx(0.5)


# --- Kuiper --------------------------------------------------------------------------------------


def test_kuiper_by_hand() -> None:
    # ybar = 2/4 = 0.5; sorted deviations +.5 +.5 -.5 -.5
    # stable: D = 0, .5, 1, .5, 0 -> K = 1 - 0 = 1
    stable = kuiper([1, 1, 2, 3], [1, 1, 0, 0], ties="stable")
    assert stable.value == pytest.approx(1.0)
    assert stable.reason is None
    assert stable.curve == pytest.approx((0.0, 0.5, 1.0, 0.5, 0.0))
    assert stable.effort == (1.0, 1.0, 1.0, 2.0, 3.0)
    # robust reads after each effort block: D_0 = 0, after {1,1}: 1, after {2}: .5, after {3}: 0
    robust = kuiper([3, 1, 2, 1], [0, 1, 0, 1])
    assert robust.value == pytest.approx(1.0)
    assert robust.curve == pytest.approx((0.0, 1.0, 0.5, 0.0))
    assert robust.effort == (1.0, 1.0, 2.0, 3.0)


def test_kuiper_ties_stable_vs_robust() -> None:
    # effort [1, 1], correct [1, 0], ybar = .5
    # stable reads D_1 = .5 inside the tie: D = 0, .5, 0 -> K = .5
    assert kuiper([1, 1], [1, 0], ties="stable").value == pytest.approx(0.5)
    # robust reads only D_0 = 0 and D_2 = (1 + 0) - 2 * .5 = 0 -> K = 0
    result = kuiper([1, 1], [1, 0], ties="robust")
    assert result.value == pytest.approx(0.0)
    assert result.curve == pytest.approx((0.0, 0.0))


def test_kuiper_stable_depends_on_input_order() -> None:
    # effort [1, 1, 1, 2], ybar = .5
    # order 1,1,0 | 0: D = 0, .5, 1, .5, 0 -> K = 1
    # order 1,0,1 | 0: D = 0, .5, 0, .5, 0 -> K = .5
    # robust: D_0 = 0, after the tie 2 - 3 * .5 = .5, D_4 = 0 -> K = .5 for both orders
    effort = [1, 1, 1, 2]
    assert kuiper(effort, [1, 1, 0, 0], ties="stable").value == pytest.approx(1.0)
    assert kuiper(effort, [1, 0, 1, 0], ties="stable").value == pytest.approx(0.5)
    assert kuiper(effort, [1, 1, 0, 0]).value == pytest.approx(0.5)
    assert kuiper(effort, [1, 0, 1, 0]).value == pytest.approx(0.5)


def test_kuiper_robust_is_order_invariant() -> None:
    rng = random.Random(5)
    stable_values: set[float] = set()
    for _ in range(50):
        n = rng.randint(2, 40)
        effort = [rng.randint(1, 6) for _ in range(n)]  # many ties
        correct = [rng.choice([0.0, 0.5, 1.0]) for _ in range(n)]
        if len(set(correct)) == 1:
            correct[0] = 1.0 - correct[0] if correct[0] != 0.5 else 1.0
        expected = kuiper(effort, correct).value
        for _ in range(5):
            pairs = list(zip(effort, correct, strict=True))
            rng.shuffle(pairs)
            e, c = zip(*pairs, strict=True)
            assert kuiper(list(e), list(c)).value == pytest.approx(expected, abs=1e-12)
    # the stable variant does move under permutation (checked on one case with ties)
    effort = [1, 1, 1, 1, 2, 2, 3]
    correct = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    for _ in range(30):
        pairs = list(zip(effort, correct, strict=True))
        rng.shuffle(pairs)
        e, c = zip(*pairs, strict=True)
        stable_values.add(round(kuiper(list(e), list(c), ties="stable").value, 9))
    assert len(stable_values) > 1


def test_kuiper_undefined_cases() -> None:
    empty = kuiper([], [])
    assert math.isnan(empty.value) and empty.reason == "no items"
    assert empty.curve == () and empty.effort == ()
    missing = kuiper([1, None, float("nan"), 2], [1, 0, 1, 0])
    assert math.isnan(missing.value)
    assert missing.reason == "no effort reported for 2 items"
    one_missing = kuiper([1, None], [1, 0])
    assert one_missing.reason == "no effort reported for 1 item"
    all_right = kuiper([1, 2, 3], [1, 1, 1])
    assert math.isnan(all_right.value)
    assert all_right.reason == "accuracy is 1: the curve is flat"
    all_wrong = kuiper([1, 2, 3], [0, 0, 0])
    assert all_wrong.reason == "accuracy is 0: the curve is flat"
    with pytest.raises(ValueError):
        kuiper([1, 2], [1])
    with pytest.raises(ValueError):
        kuiper([1, 2], [1, 0], ties="sorted")  # type: ignore[arg-type]


def test_kuiper_partial_credit() -> None:
    # effort [1, 2, 3], correct [1, .5, 0]: ybar = 1.5 / 3 = .5
    # deviations +.5, 0, -.5: D = 0, .5, .5, 0 -> K = .5
    result = kuiper([1, 2, 3], [1, 0.5, 0])
    assert isinstance(result, KuiperResult)
    assert result.value == pytest.approx(0.5)
    assert result.curve == pytest.approx((0.0, 0.5, 0.5, 0.0))
    # correct only when it took many steps: effort [1, 1, 5], correct [0, .5, 1], ybar = .5
    # robust: D_0 = 0, after {1, 1}: .5 - 2 * .5 = -.5, after {5}: 0 -> K = .5
    assert kuiper([5, 1, 1], [1, 0, 0.5]).value == pytest.approx(0.5)


def test_kuiper_in_units_of_items() -> None:
    # 10 right at effort 1, then 10 wrong at effort 2: ybar = .5, D peaks at 10 * .5 = 5
    result = kuiper([1] * 10 + [2] * 10, [1] * 10 + [0] * 10)
    assert result.value == pytest.approx(5.0)


def test_effort_share_incorrect() -> None:
    # wrong (< 0.5) items: efforts 2 and 4; total 1 + 2 + 3 + 4 = 10 -> 6 / 10 = 0.6
    # (partial credit 0.5 is not wasted)
    assert effort_share_incorrect([1, 2, 3, 4], [1, 0, 0.5, 0]) == pytest.approx(0.6)
    assert effort_share_incorrect([1, 2], [1, 1]) == 0.0
    assert math.isnan(effort_share_incorrect([0, 0], [0, 1]))
    assert math.isnan(effort_share_incorrect([1, None], [0, 1]))
    assert math.isnan(effort_share_incorrect([], []))


def test_wasted_effort_ratio_is_the_papers() -> None:
    """Official eval/metrics.py: mean effort of incorrect / mean effort of correct, effort > 0 only."""
    w = wasted_effort_ratio([1, 2, 3, 4, 0], [1, 0, 0.5, 0, 0])  # correct: 1, 3 (0.5 counts); incorrect: 2, 4
    assert (w.mean_correct, w.mean_incorrect, w.n_correct, w.n_incorrect) == (2.0, 3.0, 2, 2)
    assert w.ratio == pytest.approx(1.5)  # the effort-0 item is left out, as there
    assert wasted_effort_ratio([1, 2], [1, 1]).ratio == 0.0
    assert math.isinf(wasted_effort_ratio([3, 1], [0, 0]).ratio)  # no correct item: inf, as there
    assert math.isnan(wasted_effort_ratio([0, None], [0, 1]).ratio)  # no effort at all: undefined
    # the file the issue measured: share 0.24 and ratio 0.78 are different numbers
    effort, correct = [2, 4, 6, 8, 3, 5], [1, 1, 1, 0, 0, 1]
    assert wasted_effort_ratio(effort, correct).ratio == pytest.approx(5.5 / 4.25)
    assert effort_share_incorrect(effort, correct) == pytest.approx(11 / 28)


# --- Rogan-Gladen bias correction -----------------------------------------------------------------


def test_rogan_gladen_point_estimate() -> None:
    assert (Q0, Q1, M0, M1) == (1.0, 0.98, 48, 152)
    # (0.8 + 1 - 1) / (1 + 0.98 - 1) = 0.8 / 0.98 = 0.816326...
    assert rogan_gladen(0.8) == pytest.approx(0.8 / 0.98)
    assert rogan_gladen(0.8) == pytest.approx(0.8163265306)
    # (0.4 + 0.7 - 1) / (0.7 + 0.9 - 1) = 0.1 / 0.6 = 1/6
    assert rogan_gladen(0.4, 0.7, 0.9) == pytest.approx(1 / 6)


def test_rogan_gladen_clips() -> None:
    # 0.995 / 0.98 = 1.0153 -> 1
    assert rogan_gladen(0.995) == 1.0
    # (0.1 + 0.8 - 1) / (0.8 + 0.9 - 1) = -0.1 / 0.7 -> 0
    assert rogan_gladen(0.1, 0.8, 0.9) == 0.0


def test_rogan_gladen_rejects_uninformative_judge() -> None:
    with pytest.raises(ValueError, match="must exceed 1"):
        rogan_gladen(0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="must exceed 1"):
        rg_interval_simple(0.5, 100, 0.4, 0.5)
    with pytest.raises(ValueError, match="must exceed 1"):
        rg_interval_lee(0.5, 100, 0.4, 0.5)


def test_rg_interval_lee_by_hand() -> None:
    # p = 0.4, n = 1000, q0 = 0.7, q1 = 0.9, m0 = m1 = 200, alpha = 0.05
    # z = 1.959964, z^2 = 3.841459
    # p'  = (1000 * 0.4 + 3.841459 / 2) / (1000 + 3.841459) = 401.920729 / 1003.841459 = 0.400383
    # q0' = (200 * 0.7 + 1) / 202 = 141/202 = 0.698020;  q1' = (200 * 0.9 + 1) / 202 = 181/202
    #     = 0.896040;  n' = 1003.841459, m0' = m1' = 202
    # q0' + q1' - 1 = 120/202 = 0.594059
    # th = (0.400383 + 0.698020 - 1) / 0.594059 = 0.098402 / 0.594059 = 0.165644
    # var_q0 = q0'(1 - q0')/m0' = 141 * 61 / 202^3 = 8601 / 8242408 = 0.00104351
    # var_q1 = q1'(1 - q1')/m1' = 181 * 21 / 202^3 = 3801 / 8242408 = 0.00046115
    # var_p  = 0.400383 * 0.599617 / 1003.841459 = 0.000239158
    # dth = 2 * 3.841459 * (-(1 - 0.165644) * 0.00104351 + 0.165644 * 0.00046115)
    #     = 7.682918 * (-0.00087066 + 0.00007639) = 7.682918 * -0.00079427 = -0.0061023
    # se = sqrt(0.000239158 + 0.834356^2 * 0.00104351 + 0.165644^2 * 0.00046115) / 0.594059
    #    = sqrt(0.000239158 + 0.00072644 + 0.00001265) / 0.594059
    #    = sqrt(0.00097825) / 0.594059 = 0.0312769 / 0.594059 = 0.0526495;  z * se = 0.1031912
    # low  = 0.165644 - 0.006102 - 0.103191 = 0.056351
    # high = 0.165644 - 0.006102 + 0.103191 = 0.262733
    ci = rg_interval_lee(0.4, 1000, 0.7, 0.9, 200, 200, alpha=0.05)
    assert isinstance(ci, Interval)
    assert ci.low == pytest.approx(0.056351, abs=2e-6)
    assert ci.high == pytest.approx(0.262733, abs=2e-6)


def test_rg_interval_lee_defaults_contain_estimate() -> None:
    ci = rg_interval_lee(0.8, 500)
    assert 0.0 <= ci.low < rogan_gladen(0.8) < ci.high <= 1.0


def test_rg_interval_simple() -> None:
    # a perfect judge (q0 = q1 = 1) leaves only the binomial term:
    # se = sqrt(0.5 * 0.5 / 100) = 0.05, 0.5 -/+ 1.959964 * 0.05 = (0.402002, 0.597998)
    ci = rg_interval_simple(0.5, 100, 1.0, 1.0)
    assert ci.low == pytest.approx(0.402002, abs=1e-6)
    assert ci.high == pytest.approx(0.597998, abs=1e-6)
    small = rg_interval_simple(0.6, 300, 0.9, 0.85, 50, 50)
    large = rg_interval_simple(0.6, 300, 0.9, 0.85, 5000, 5000)
    theta = rogan_gladen(0.6, 0.9, 0.85)
    assert small.low < theta < small.high
    assert large.low < theta < large.high
    assert large.high - large.low < small.high - small.low
    # clipped to [0, 1]: (0.99 + 1 - 1) / 0.98 = 1.0102 lies above 1
    assert rg_interval_simple(0.99, 50).high == 1.0


def test_estimate_q() -> None:
    # human-incorrect: 4 items, the judge agrees on 3 -> q0 = 3/4; human-correct: 5 items, the
    # judge agrees on 4 -> q1 = 4/5
    labels = [(False, False)] * 3 + [(False, True)] + [(True, True)] * 4 + [(True, False)]
    assert estimate_q(labels) == (0.75, 0.8, 4, 5)
    with pytest.raises(ValueError, match="judged incorrect"):
        estimate_q([(True, True), (True, False)])
    with pytest.raises(ValueError, match="judged correct"):
        estimate_q([(False, False)])


# --- intervals ----------------------------------------------------------------------------------


def test_wilson_interval_textbook() -> None:
    # 8 of 10 at 95%: z = 1.959964, z^2/n = 0.384146, denominator 1.384146
    # centre = (0.8 + 3.841459 / 20) / 1.384146 = 0.992073 / 1.384146 = 0.716740
    # half = 1.959964 / 1.384146 * sqrt(0.8 * 0.2 / 10 + 3.841459 / 400)
    #      = 1.416010 * sqrt(0.016 + 0.009604) = 1.416010 * 0.160011 = 0.226578
    # -> (0.716740 - 0.226578, 0.716740 + 0.226578) = (0.490162, 0.943318)
    low, high = wilson_interval(8, 10)
    assert round(low, 4) == 0.4902
    assert round(high, 4) == 0.9433
    assert low == pytest.approx(0.490162, abs=2e-6)
    assert high == pytest.approx(0.943318, abs=2e-6)


def test_wilson_interval_edges() -> None:
    low, high = wilson_interval(0, 0)
    assert math.isnan(low) and math.isnan(high)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and 0.0 < high < 0.2
    # fractional successes (partial credit sums) are accepted: 7.5 of 10 lies between 7 and 8
    assert wilson_interval(7, 10)[0] < wilson_interval(7.5, 10)[0] < wilson_interval(8, 10)[0]


def test_bootstrap_mean_ci() -> None:
    values = np.array([0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    ci = bootstrap_mean_ci(values, seed=3)
    assert ci == bootstrap_mean_ci(list(values), seed=3)  # deterministic for a seed
    continuous = np.random.default_rng(0).random(30)
    assert bootstrap_mean_ci(continuous, seed=3) != bootstrap_mean_ci(continuous, seed=4)
    assert ci[0] < values.mean() < ci[1]
    assert ci[0] >= 0.0 and ci[1] <= 1.0
    assert bootstrap_mean_ci([0.25]) == (0.25, 0.25)
    empty = bootstrap_mean_ci([])
    assert math.isnan(empty[0]) and math.isnan(empty[1])


def test_bootstrap_means_ci_is_paired() -> None:
    rng = np.random.default_rng(1)
    a = rng.random(50)
    cis = bootstrap_means_ci({"a": a, "twice": 2 * a, "same": a.copy()}, resamples=500, seed=7)
    # the same resampled indices for every column: doubling a column doubles its interval
    # exactly (x2 is exact in floating point), and a copy gets the identical interval
    assert cis["twice"] == (2 * cis["a"][0], 2 * cis["a"][1])
    assert cis["same"] == cis["a"]
    # and one column alone gives the same numbers as in company
    assert bootstrap_mean_ci(a, resamples=500, seed=7) == cis["a"]
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_means_ci({"a": a, "b": a[:10]})


def test_exact_match_is_anls_star_of_one() -> None:
    """Scoring sets `exact = (ANLS* == 1)` instead of calling exact_match: the two must agree."""
    import random

    from deskbench.tracks.docqa.scoring.answer import anls_star, exact_match

    rng = random.Random(5)
    words = ["a", "b", "Paris", "paris ", "12", "1 2", ""]
    for _ in range(2000):
        pred = [rng.choice(words) for _ in range(rng.randint(0, 3))]
        variants = [[rng.choice(words) for _ in range(rng.randint(0, 3))] for _ in range(rng.randint(1, 3))]
        assert exact_match(pred, variants) == (anls_star(pred, variants) == 1.0), (pred, variants)


def test_bootstrap_over_few_distinct_values_matches_index_resampling() -> None:
    """The multinomial shortcut (few distinct per-item values) is the same bootstrap distribution
    as resampling item indices: compare the two intervals on the same data."""
    import numpy as np

    from deskbench.analysis.stats import bootstrap_means_ci

    rng = np.random.default_rng(1)
    page = rng.choice([0.0, 0.5, 2 / 3, 1.0], size=4000, p=[0.3, 0.1, 0.1, 0.5])
    doc = np.where(page > 0, 1.0, rng.choice([0.0, 1.0], size=4000))
    fast = bootstrap_means_ci({"page": page, "doc": doc}, resamples=4000, seed=0)
    idx = np.random.default_rng(2).integers(0, len(page), size=(4000, len(page)))
    for name, values in (("page", page), ("doc", doc)):
        slow = np.quantile(values[idx].mean(axis=1), [0.025, 0.975])
        assert abs(fast[name][0] - slow[0]) < 0.004 and abs(fast[name][1] - slow[1]) < 0.004
