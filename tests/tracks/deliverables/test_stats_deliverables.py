"""VRS / ACCEPT (consulting paper Eq. 1-3) and the deliverables statistics: each statistic against
scipy or a numpy formula, the paper's own arithmetic (Tables 6, 9, 12, 14, 17, 18) and hand-made
rows whose diagnostics are computed by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deskbench.analysis.stats import (
    Correlation,
    McNemar,
    average_ranks,
    bonferroni,
    cohens_d,
    correlation_matrix,
    correlation_pvalue,
    holm,
    jaccard,
    mcnemar_exact,
    pearson_test,
    spearman,
)
from deskbench.tracks.deliverables.scoring.vrs import (
    PAPER_WEIGHTINGS,
    GradedRow,
    Weighting,
    accept,
    auto_reject,
    reasoning_mean,
    vrs_relaxed,
    vrs_strict,
    vrs_weighted,
)
from deskbench.tracks.deliverables.scoring.vrs_diagnostics import (
    sole_cause,
    sole_cause_summary,
    weight_sensitivity,
)
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

CODES = RUBRIC_CODES  # DI, AR, RF, EP, FD


def sc(di: int, ar: int, rf: int, ep: int, fd: int) -> dict[str, int]:
    return {"DI": di, "AR": ar, "RF": rf, "EP": ep, "FD": fd}


# --- Eq. 1-3 on hand-computed cases -------------------------------------------------------------


def test_vrs_hand_cases() -> None:
    s = sc(1, 2, 2, 1, 2)  # sum 8, rbar 1.6 -> scaled 53.333
    assert reasoning_mean(s) == pytest.approx(1.6)
    assert vrs_relaxed(46, s) == pytest.approx(23 + 0.5 * 160 / 3)  # 49.667
    assert vrs_strict(46, s) == pytest.approx(49.6666667)
    assert not auto_reject(s) and not accept(46, s)

    zero = sc(0, 3, 3, 3, 3)  # rbar 2.4: relaxed 50 + 40 = 90, strict 0
    assert vrs_relaxed(100, zero) == pytest.approx(90.0)
    assert vrs_strict(100, zero) == 0.0
    assert auto_reject(zero)
    assert not accept(100, zero, mean_min=2.0)  # the zero alone rejects it

    assert vrs_relaxed(100, sc(3, 3, 3, 3, 3)) == 100.0
    assert vrs_strict(0, sc(1, 1, 1, 1, 1)) == pytest.approx(50 / 3)


def test_accept_boundaries() -> None:
    s13 = sc(3, 3, 2, 3, 2)  # sum 13: rbar 2.6
    s12 = sc(3, 3, 2, 2, 2)  # sum 12: rbar 2.4
    assert accept(80, s13)  # V exactly 80 is accepted
    assert accept(100 * 4 / 5, s13) and accept(0.8 * 100, s13)
    assert not accept(79.99, s13)
    assert not accept(100, s12)
    # rbar = 2.5 is unattainable with five integers (sums are multiples of 0.2), so the
    # inclusive mean threshold is checked at rbar exactly 2.4:
    assert accept(80, s12, mean_min=2.4)
    assert not accept(80, s12, mean_min=2.41)
    assert accept(50, s13, v_min=50) and not accept(49.5, s13, v_min=50)


@pytest.mark.parametrize(
    ("v", "scores", "match"),
    [
        (50, {"DI": 1, "AR": 1, "RF": 1, "EP": 1}, "miss FD"),
        (50, {**sc(1, 1, 1, 1, 1), "XX": 1}, "unknown rubric code"),
        (50, sc(4, 1, 1, 1, 1), "DI must be an integer 0..3"),
        (50, sc(1, -1, 1, 1, 1), "AR must be an integer 0..3"),
        (50, {**sc(1, 1, 1, 1, 1), "EP": 2.5}, "EP must be an integer"),
        (50, {**sc(1, 1, 1, 1, 1), "FD": True}, "FD must be an integer"),
        (101, sc(1, 1, 1, 1, 1), "0..100"),
        (-0.1, sc(1, 1, 1, 1, 1), "0..100"),
        (math.nan, sc(1, 1, 1, 1, 1), "0..100"),
        ("80", sc(1, 1, 1, 1, 1), "must be a number"),
    ],
)
def test_vrs_validation(v: object, scores: dict[str, object], match: str) -> None:
    for fn in (vrs_relaxed, vrs_strict, accept):
        with pytest.raises(ValueError, match=match):
            fn(v, scores)  # type: ignore[operator]


def test_numpy_integer_scores_accepted() -> None:
    s = {c: np.int64(2) for c in CODES}
    assert vrs_relaxed(np.float64(50.0), s) == pytest.approx(25 + 100 / 3)


def test_graded_row_validates_and_copies() -> None:
    scores = sc(3, 3, 3, 3, 3)
    row = GradedRow("x", "t1", 90, scores)
    scores["DI"] = 0
    assert row.scores["DI"] == 3 and row.accepted and row.rbar == 3.0
    with pytest.raises(ValueError, match="x / t2: .*EP must be an integer"):
        GradedRow("x", "t2", 90, sc(3, 3, 3, 9, 3))
    with pytest.raises(ValueError, match="0..100"):
        GradedRow("x", "t3", 120, sc(3, 3, 3, 3, 3))


def test_weightings() -> None:
    names = [w.name for w in PAPER_WEIGHTINGS]
    assert names == ["baseline", "A", "B", "C", "D"]
    base = PAPER_WEIGHTINGS[0]
    for v, s in [(46, sc(1, 2, 2, 1, 2)), (100, sc(0, 3, 3, 3, 3)), (80, sc(3, 3, 2, 3, 2))]:
        assert vrs_weighted(v, s, base, strict=False) == vrs_relaxed(v, s)
        assert vrs_weighted(v, s, base) == vrs_strict(v, s)
    s = sc(3, 2, 1, 3, 2)  # DI 100, AR 66.67, RF 33.33, EP 100, FD 66.67 on the 0..100 scale
    d = PAPER_WEIGHTINGS[4]
    # 0.2*60 + 0.17*100 + 0.17*66.667 + 0.14*33.333 + 0.21*100 + 0.11*66.667 = 73.333
    assert vrs_weighted(60, s, d) == pytest.approx(12 + 17 + 34 / 3 + 14 / 3 + 21 + 22 / 3)
    c = PAPER_WEIGHTINGS[3]
    assert vrs_weighted(60, s, c) == pytest.approx(15 + 0.75 * 220 / 3)  # rbar 2.2 -> 73.333
    assert vrs_weighted(60, sc(0, 3, 3, 3, 3), d) == 0.0
    assert vrs_weighted(60, sc(0, 3, 3, 3, 3), d, strict=False) == pytest.approx(
        12 + 17 + 14 + 21 + 11
    )

    with pytest.raises(ValueError, match="sum to 0.9"):
        Weighting(name="bad", v_weight=0.4, rubric_weight=0.5)
    with pytest.raises(ValueError, match="not both"):
        Weighting(name="bad", v_weight=0.5, rubric_weight=0.5, criterion_weights={"V": 1.0})
    with pytest.raises(ValueError, match="not both and not neither"):
        Weighting(name="bad")
    with pytest.raises(ValueError, match="both v_weight and rubric_weight"):
        Weighting(name="bad", v_weight=1.0)
    with pytest.raises(ValueError, match="exactly the keys"):
        Weighting(name="bad", criterion_weights={"V": 0.5, "EP": 0.5})
    with pytest.raises(ValueError, match="non-negative"):
        Weighting(name="bad", v_weight=1.5, rubric_weight=-0.5)


# --- statistics against scipy / numpy -----------------------------------------------------------


def _samples() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    out = []
    for n in (3, 5, 12, 42, 126):
        x = rng.normal(size=n)
        out.append((x, 0.6 * x + rng.normal(size=n)))  # continuous
        out.append((rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)))
        a = rng.integers(0, 4, n).astype(float)  # ties, correlated: rubric vs 0/1 ACCEPT
        out.append((a, (a + rng.integers(0, 2, n) >= 3).astype(float)))
    return [(x, y) for x, y in out if np.ptp(x) > 0 and np.ptp(y) > 0]


def test_spearman_and_pearson_match_scipy() -> None:
    from scipy import stats as sps
    samples = _samples()
    assert len(samples) >= 12
    for x, y in samples:
        ref = sps.spearmanr(x, y)
        got = spearman(x, y)
        assert isinstance(got, Correlation) and got.n == len(x)
        assert got.rho == pytest.approx(ref.statistic, abs=1e-12)
        assert got.p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
        ref_p = sps.pearsonr(x, y)
        got_p = pearson_test(x, y)
        assert got_p.rho == pytest.approx(ref_p.statistic, abs=1e-12)
        assert got_p.p == pytest.approx(ref_p.pvalue, rel=1e-9, abs=1e-300)


def test_ranks_and_degenerate_correlations() -> None:
    from scipy import stats as sps
    data = [3, 1, 2, 2, 3, 0, 2]
    assert average_ranks(data).tolist() == sps.rankdata(data).tolist()
    assert average_ranks(data).tolist() == [6.5, 2.0, 4.0, 4.0, 6.5, 1.0, 4.0]
    for fn in (spearman, pearson_test):
        c = fn([1, 1, 1, 1], [1, 2, 3, 4])
        assert math.isnan(c.rho) and math.isnan(c.p) and c.n == 4
        c = fn([1.0, math.nan, 3.0], [1, 2, 3])
        assert math.isnan(c.rho) and math.isnan(c.p)
        with pytest.raises(ValueError, match="differ in length"):
            fn([1, 2, 3], [1, 2])
    perfect = spearman([1, 2, 3, 4], [10, 20, 30, 45])
    assert perfect.rho == pytest.approx(1.0) and perfect.p == 0.0
    two = spearman([1, 2], [2, 1])
    assert two.rho == pytest.approx(-1.0) and math.isnan(two.p)  # no degrees of freedom
    assert math.isnan(correlation_pvalue(math.nan, 50))


def test_correlation_matrix() -> None:
    from scipy import stats as sps
    rng = np.random.default_rng(3)
    cols = {c: rng.integers(0, 4, 40).astype(float) for c in CODES}
    cols["const"] = np.ones(40)
    pm = correlation_matrix(cols)
    ref = np.corrcoef(np.stack([cols[c] for c in CODES]))
    for i, a in enumerate(CODES):
        assert pm[a][a] == 1.0
        for j, b in enumerate(CODES):
            assert pm[a][b] == pytest.approx(ref[i, j], abs=1e-12)
            assert pm[a][b] == pm[b][a]
        assert math.isnan(pm[a]["const"])
    assert math.isnan(pm["const"]["const"])
    sm = correlation_matrix(cols, method="spearman")
    assert sm["DI"]["EP"] == pytest.approx(sps.spearmanr(cols["DI"], cols["EP"]).statistic)
    with pytest.raises(ValueError, match="differ in length"):
        correlation_matrix({"a": [1, 2, 3], "b": [1, 2]})
    with pytest.raises(ValueError, match="method"):
        correlation_matrix(cols, method="kendall")  # type: ignore[arg-type]


def test_cohens_d_matches_numpy_formula() -> None:
    rng = np.random.default_rng(11)
    for na, nb in [(2, 2), (6, 6), (7, 9), (42, 42), (3, 30)]:
        a, b = rng.normal(2, 1, na), rng.normal(1.6, 0.7, nb)
        pooled = np.sqrt(
            ((na - 1) * np.var(a, ddof=1) + (nb - 1) * np.var(b, ddof=1)) / (na + nb - 2)
        )
        assert cohens_d(a, b) == pytest.approx((a.mean() - b.mean()) / pooled, rel=1e-12)
        assert cohens_d(b, a) == pytest.approx(-cohens_d(a, b))
    # hand: a = 1,2,3 (mean 2, ss 2), b = 3,4,5 (mean 4, ss 2): pooled sd = sqrt(4/4) = 1
    assert cohens_d([1, 2, 3], [3, 4, 5]) == pytest.approx(-2.0)
    assert math.isnan(cohens_d([1, 1], [1, 1]))  # no spread
    assert math.isnan(cohens_d([], [1, 2, 3]))
    assert math.isnan(cohens_d([1], [2]))  # no degrees of freedom
    assert cohens_d([1], [2, 4]) == pytest.approx((1 - 3) / math.sqrt(2))  # ss 2 over 1 dof


def test_mcnemar_matches_scipy_binomtest() -> None:
    from scipy import stats as sps
    rng = np.random.default_rng(5)
    for n in (1, 5, 20, 42, 200):
        for pa, pb in [(0.1, 0.3), (0.5, 0.5), (0.2, 0.2), (0.9, 0.4)]:
            a = (rng.random(n) < pa).tolist()
            b = (rng.random(n) < pb).tolist()
            got = mcnemar_exact(a, b)
            assert got.both + got.a_only + got.b_only + got.neither == n
            disc = got.a_only + got.b_only
            ref = 1.0 if disc == 0 else sps.binomtest(got.a_only, disc, 0.5).pvalue
            assert got.p == pytest.approx(ref, rel=1e-12)
    assert mcnemar_exact([True, False], [True, False]) == McNemar(1, 0, 0, 1, 1.0)
    assert mcnemar_exact([1, 1, 1], [0, 0, 0]).p == pytest.approx(0.25)  # 2 * 1/8
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar_exact([True], [True, False])
    with pytest.raises(ValueError, match="booleans"):
        mcnemar_exact([2], [1])


def test_holm_hand_example() -> None:
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max(0.06, 0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # 0.5*2 capped at 1; monotone
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.2, 1.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([math.nan])


def test_jaccard() -> None:
    assert jaccard(set(), set()) == 1.0
    assert jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert jaccard({1}, set()) == 0.0


# --- the paper's own arithmetic -----------------------------------------------------------------

TABLE6_V = {"Claude": 46.31, "o3": 59.72, "Gemini": 57.79}
TABLE6_RBAR = {"Claude": 1.65, "o3": 1.97, "Gemini": 1.81}
TABLE10_MEANS = {  # per-criterion means (Table 10); their mean is Table 6's rbar
    "Claude": {"DI": 1.50, "AR": 1.79, "RF": 1.98, "EP": 1.19, "FD": 1.81},
    "o3": {"DI": 1.83, "AR": 1.86, "RF": 2.48, "EP": 1.55, "FD": 2.12},
    "Gemini": {"DI": 1.69, "AR": 1.90, "RF": 2.00, "EP": 1.67, "FD": 1.81},
}
TABLE18 = {  # weighting -> mean VRS (Claude, o3, Gemini); baseline = Table 12's relaxed column
    "baseline": (50.70, 62.64, 59.14),
    "A": (52.01, 63.51, 59.54),
    "B": (51.57, 63.22, 59.40),
    "C": (52.89, 64.10, 59.81),
    "D": (52.07, 63.02, 59.57),
}
N_SYNTH = 200  # 200 rows make every three-decimal bound (x.xx5) an exact integer score total


def _rows_with_means(system: str, v: float, criterion_sums: dict[str, int]) -> list[GradedRow]:
    """N_SYNTH rows with V = v each and the given per-criterion score totals, so their means are
    exactly v and total / N_SYNTH: the mean of any VRS over them is the VRS of those means
    (every weighting is linear, and no score is 0 so strict = relaxed)."""
    rows = []
    for i in range(N_SYNTH):
        scores = {}
        for c, total in criterion_sums.items():
            base, extra = divmod(total, N_SYNTH)
            scores[c] = base + (1 if i < extra else 0)
        rows.append(GradedRow(system, f"p{i}", v, scores))
    return rows


def _split_total(total: int) -> dict[str, int]:
    base, extra = divmod(total, 5)
    return {c: base + (1 if k < extra else 0) for k, c in enumerate(CODES)}


def _mean_vrs_bounds(system: str, weighting: Weighting) -> tuple[float, float]:
    """Mean VRS of rows at the low / high end of Table 6's (or Table 10's) rounding intervals."""
    out = []
    for sign in (-1, 1):
        v = TABLE6_V[system] + sign * 0.005
        if weighting.criterion_weights is None:
            total = round((TABLE6_RBAR[system] + sign * 0.005) * 5 * N_SYNTH)
            sums = _split_total(total)
        else:
            sums = {
                c: round((m + sign * 0.005) * N_SYNTH) for c, m in TABLE10_MEANS[system].items()
            }
        rows = _rows_with_means(system, v, sums)
        vals = [vrs_weighted(r.v, r.scores, weighting, strict=False) for r in rows]
        if weighting.name == "baseline":
            assert vals == [vrs_relaxed(r.v, r.scores) for r in rows]
        out.append(float(np.mean(vals)))
    return out[0], out[1]


def test_table6_means_reproduce_table12_relaxed_vrs() -> None:
    base = PAPER_WEIGHTINGS[0]
    for system, printed in zip(TABLE6_V, TABLE18["baseline"], strict=True):
        lo, hi = _mean_vrs_bounds(system, base)
        # the interval is 0.5*0.01 + 0.5*0.01/3*100 = 0.172 wide
        assert hi - lo == pytest.approx(0.005 + 0.5 / 3 * 100 * 0.01, rel=1e-9)
        assert lo <= printed <= hi, (system, lo, printed, hi)


def test_table18_means_are_the_relaxed_variant() -> None:
    # Table 18's caption says strict, but every row follows from Table 6/10's means under the
    # relaxed variant (strict would pull Claude down by ~8.7 points, Table 12).
    for w in PAPER_WEIGHTINGS:
        for system, printed in zip(TABLE6_V, TABLE18[w.name], strict=True):
            lo, hi = _mean_vrs_bounds(system, w)
            assert lo <= printed <= hi, (w.name, system, lo, printed, hi)
    # the strict Claude mean (Table 6: 41.96) is outside the relaxed interval: the test can fail
    lo, hi = _mean_vrs_bounds("Claude", PAPER_WEIGHTINGS[0])
    assert not lo <= 41.96 <= hi


def _table17_vectors() -> dict[str, list[bool]]:
    """42 prompts consistent with Table 17: prompts 0-3 Claude only, 4 o3 only, 5-7 o3 and
    Gemini, 8-13 Gemini only, 14-41 nobody."""
    acc = {name: [False] * 42 for name in ("Claude", "o3", "Gemini")}
    for i in range(0, 4):
        acc["Claude"][i] = True
    acc["o3"][4] = True
    for i in range(5, 8):
        acc["o3"][i] = acc["Gemini"][i] = True
    for i in range(8, 14):
        acc["Gemini"][i] = True
    return acc


def test_table17_mcnemar_table9_and_accept_rates() -> None:
    acc = _table17_vectors()
    expected = {  # Table 17: both, A only, B only, both rejected, p
        ("Claude", "o3"): (0, 4, 4, 34, "1.000"),
        ("Claude", "Gemini"): (0, 4, 9, 29, "0.267"),
        ("o3", "Gemini"): (3, 1, 6, 32, "0.125"),
    }
    pvals = []
    for (a, b), (both, a_only, b_only, neither, p) in expected.items():
        got = mcnemar_exact(acc[a], acc[b])
        assert (got.both, got.a_only, got.b_only, got.neither) == (both, a_only, b_only, neither)
        assert f"{got.p:.3f}" == p
        pvals.append(got.p)
    assert pvals[1] == 2 * (1 + 13 + 78 + 286 + 715) / 2**13  # 2 P[Bin(13, 1/2) <= 4]
    per_prompt = [sum(acc[s][i] for s in acc) for i in range(42)]
    assert [per_prompt.count(k) for k in range(4)] == [28, 11, 3, 0]  # Table 9
    rates = {s: f"{100 * sum(v) / 42:.2f}" for s, v in acc.items()}
    assert rates == {"Claude": "9.52", "o3": "9.52", "Gemini": "21.43"}  # Table 6

    # Holm over the three pairs: 0.125*3 = 0.375, 0.2668*2 = 0.5337, 1.0 -> still nothing < 0.05
    adjusted = holm(pvals)
    assert adjusted == pytest.approx([1.0, 2 * pvals[1], 0.375])
    assert f"{adjusted[1]:.4f}" == "0.5337"


def test_table14_p_from_rho() -> None:
    # (rho, printed p) with n = 126: rho is printed to three decimals, so the p of the printed
    # rho +- 0.0005 brackets the printed p (itself rounded to three significant digits).
    table14 = [
        (0.524, 2.91e-10),
        (0.466, 3.84e-8),
        (0.552, 2.18e-11),
        (0.464, 4.61e-8),
        (0.375, 1.55e-5),
        (0.306, 4.91e-4),
    ]
    for rho, printed in table14:
        hi = correlation_pvalue(rho - 0.0005, 126)
        lo = correlation_pvalue(rho + 0.0005, 126)
        half_digit = 0.005 * 10 ** math.floor(math.log10(printed))
        assert lo - half_digit <= printed <= hi + half_digit, (rho, lo, printed, hi)
    assert f"{correlation_pvalue(0.306, 126):.2e}" == "4.93e-04"
    # A normal approximation (z = rho sqrt(n-1)) would not reproduce the smallest p-values
    z_p = math.erfc(0.552 * math.sqrt(125) / math.sqrt(2))
    assert not 1.9e-11 <= z_p <= 2.3e-11


# --- hand-made graded rows ----------------------------------------------------------------------

HAND = [
    # system, task, V, (DI AR RF EP FD)        rbar  relaxed (0.5/0.5)  rule / diagnostics
    GradedRow("X", "t1", 100, sc(3, 3, 3, 3, 2)),  # 2.8  96.667  ACCEPT
    GradedRow("X", "t2", 80, sc(3, 3, 2, 3, 2)),  # 2.6  83.333  ACCEPT (V exactly 80)
    GradedRow("X", "t3", 90, sc(2, 2, 2, 1, 2)),  # 1.8  75.0    sole cause EP
    GradedRow("X", "t4", 100, sc(0, 3, 3, 3, 3)),  # 2.4  90.0   strict 0; sole cause DI
    GradedRow("Y", "t1", 100, sc(3, 3, 3, 3, 3)),  # 3.0  100     ACCEPT
    GradedRow("Y", "t2", 60, sc(3, 3, 3, 3, 3)),  # 3.0  80.0    V < 80
    GradedRow("Y", "t3", 85, sc(2, 2, 2, 2, 2)),  # 2.0  75.833  all >= 2, rbar < 2.5
    GradedRow("Y", "t4", 80, sc(1, 1, 3, 3, 3)),  # 2.2  76.667  two below 2: not sole cause
]


def test_sole_cause_hand_rows() -> None:
    assert sole_cause(HAND) == {"DI": 1, "AR": 0, "RF": 0, "EP": 1, "FD": 0}
    summary = sole_cause_summary(HAND)
    assert summary.cleared_v == 7  # all but Y/t2
    assert summary.all_at_least_2 == 4  # X/t1, X/t2, Y/t1, Y/t3
    assert summary.accepted_all_at_least_2 == 3  # Y/t3 has rbar 2.0
    assert summary.sole_cause_total == 2
    assert summary.auto_rejected == 1  # X/t4
    # a zero caps rbar at 12/5 = 2.4 < 2.5, so the auto-reject rule can never be the only reason
    # for a REJECT under the paper's thresholds (its "zero unique cases", §4.10.2, by arithmetic)
    assert not accept(100, sc(0, 3, 3, 3, 3), mean_min=2.5)
    assert sole_cause([]) == dict.fromkeys(CODES, 0)


def test_sole_cause_counts_rejections_only() -> None:
    # §4.10.2: "would have ACCEPTed except that R alone scored below 2". One 1 and four 3s with
    # V = 90 has rbar 2.6: Eq. 3 accepts it, so it is no failure and counts for no criterion.
    row = GradedRow("X", "t", 90, sc(1, 3, 3, 3, 3))
    assert row.accepted
    assert sole_cause([row]) == dict.fromkeys(CODES, 0)
    summary = sole_cause_summary([row])
    assert summary.sole_cause_total == 0 and summary.one_below_2_accepted == 1
    # the same pattern rejected (rbar 2.2 < 2.5) is a sole-cause rejection for DI
    rejected = GradedRow("X", "t2", 90, sc(1, 3, 3, 2, 2))
    assert not rejected.accepted and sole_cause([row, rejected])["DI"] == 1
    # V below 80, or two criteria below 2: not sole cause
    assert sole_cause([GradedRow("X", "t", 79.9, sc(1, 3, 3, 2, 2))])["DI"] == 0
    assert sole_cause([GradedRow("X", "t", 90, sc(1, 1, 3, 3, 3))]) == dict.fromkeys(CODES, 0)


def test_bonferroni() -> None:
    assert bonferroni([0.01, 0.2, None, float("nan")]) == [0.04, 0.8, None, None]
    assert bonferroni([0.3, 0.01], family=6) == [1.0, 0.06]
    # Table 14's largest printed p (FD, 4.91e-4) stays below 0.05 after correcting for six tests
    (fd,) = bonferroni([4.91e-4], family=6)
    assert fd == pytest.approx(2.946e-3) and fd < 0.05
    with pytest.raises(ValueError, match="family of 1"):
        bonferroni([0.1, 0.2], family=1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bonferroni([1.5])


def test_weight_sensitivity_hand_rows() -> None:
    weightings = [PAPER_WEIGHTINGS[0], PAPER_WEIGHTINGS[3]]
    relaxed = weight_sensitivity(HAND, weightings, strict=False)
    base = relaxed[0]
    assert base.weighting == "baseline" and base.rule_accepts == 3  # X/t1, X/t2, Y/t1
    # X: (96.667 + 83.333 + 75 + 90) / 4 = 86.25; Y: (100 + 80 + 75.833 + 76.667) / 4 = 83.125
    assert base.mean_vrs == pytest.approx({"X": 86.25, "Y": 83.125})
    # sorted: 100, 96.667, 90, ... -> T = 90; accepts Y/t1, X/t1, X/t4 (its zero ignored)
    assert base.threshold == pytest.approx(90.0)
    assert base.accepts == 3 and base.split == {"X": 2, "Y": 1}
    assert base.jaccard == pytest.approx(2 / 4)  # {X/t1, Y/t1} of {X/t1, X/t2, X/t4, Y/t1}

    strict = weight_sensitivity(HAND, weightings, strict=True)
    base = strict[0]
    assert base.mean_vrs == pytest.approx({"X": 63.75, "Y": 83.125})  # X/t4 -> 0
    # sorted: 100, 96.667, 83.333 -> exactly the rule's set
    assert base.threshold == pytest.approx(250 / 3)
    assert base.split == {"X": 2, "Y": 1} and base.jaccard == 1.0
    c = strict[1]
    # C (0.25 V + 0.75 scaled): X/t1 25 + 70 = 95, X/t2 20 + 65 = 85, Y/t1 100, Y/t2 15 + 75 = 90
    assert c.weighting == "C" and c.threshold == pytest.approx(90.0)
    assert c.split == {"X": 1, "Y": 2}
    assert c.jaccard == pytest.approx(2 / 4)  # {X/t1, Y/t1} of {X/t1, X/t2, Y/t1, Y/t2}
    # X: (95 + 85 + 22.5 + 45 + 0) / 4 ; Y: (100 + 90 + 21.25 + 50 + 20 + 55) / 4
    assert c.mean_vrs == pytest.approx(
        {"X": (95 + 85 + 67.5 + 0) / 4, "Y": (100 + 90 + 71.25 + 75) / 4}
    )

    default = weight_sensitivity(HAND, strict=True)
    assert [r.weighting for r in default] == ["baseline", "A", "B", "C", "D"]
    assert default[0] == strict[0]


def test_weight_sensitivity_ties_and_edges() -> None:
    rows = [
        GradedRow("X", "a", 100, sc(3, 3, 3, 3, 3)),  # 100, ACCEPT
        GradedRow("X", "b", 80, sc(3, 3, 3, 3, 3)),  # 40 + 50 = 90, ACCEPT
        GradedRow("Y", "c", 100, sc(3, 3, 3, 3, 0)),  # relaxed 50 + 40 = 90 (float ~89.999..)
    ]
    (row,) = weight_sensitivity(rows, [PAPER_WEIGHTINGS[0]], strict=False)
    # k = 2 -> T = 90, and the tie at 90 adds Y/c: 3 accepts (the paper's option A)
    assert row.threshold == pytest.approx(90.0) and row.accepts == 3 and row.rule_accepts == 2
    assert row.split == {"X": 2, "Y": 1} and row.jaccard == pytest.approx(2 / 3)

    none = [GradedRow("X", "a", 50, sc(1, 1, 1, 1, 1))]
    (row,) = weight_sensitivity(none, [PAPER_WEIGHTINGS[0]], strict=True)
    assert row.threshold == math.inf and row.accepts == 0 and row.jaccard == 1.0
    assert row.split == {"X": 0}

    with pytest.raises(ValueError, match="repeated"):
        weight_sensitivity([none[0], none[0]], strict=True)
