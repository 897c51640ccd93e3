"""`deskbench analyse items | splits | agreement`: every number checked by hand on tiny runs.

Three run directories over six common tasks (the first run also has a seventh task of its own).
Answers are the exact gold string (ANLS* 1 -> accuracy 1) or a wrong string / nothing (0):

            t0 t1 t2 t3 t4 t5   total
    a        1  1  1  1  1  0     5     run A
    b        1  1  1  0  0  0     3     run B
    c        1  1  0  1  0  0     3     run C
    d        1  0  -  -  -  -     1     run C (t1 wrong, t2..t5 missing = 0)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.docqa.analysis.agreement import cohen_kappa, kappa_matrix
from deskbench.tracks.docqa.analysis.items import difficulty, discrimination
from deskbench.tracks.docqa.analysis.matrix import load_matrix
from deskbench.tracks.docqa.analysis.splits import (
    build_splits,
    difficulty_bin,
    is_sentinel,
    ranking_agreement,
)
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

TASKS = [DocQATask(id=f"t{i}", question=f"q{i}?", answer_variants=[[f"answer number {i}"]]) for i in range(7)]
EXPECTED = np.array([
    [1, 1, 1, 1, 1, 0],
    [1, 1, 1, 0, 0, 0],
    [1, 1, 0, 1, 0, 0],
    [1, 0, 0, 0, 0, 0],
], dtype=np.float64)
ITEMS = [f"t{i}" for i in range(6)]


def _record(store: RunStore, system: str, row: dict[str, int]) -> None:
    """1 -> the gold answer, 0 -> a wrong answer; tasks not in `row` get no episode (missing)."""
    for tid, ok in row.items():
        answer = f"answer number {tid[1:]}" if ok else "zzzzzzzzzzzzzzzzzzzz"
        store.record(Episode(task_id=tid, system=system, status="ok",
                             submission=DocQASubmission(id=tid, answer=[answer], citations=[])))


@pytest.fixture()
def runs(tmp_path: Path) -> list[Path]:
    dirs = [tmp_path / "A", tmp_path / "B", tmp_path / "C"]
    a, b, c = (RunStore(d) for d in dirs)
    a.save_tasks(TASKS)  # t6 only in run A: not a common item
    b.save_tasks(TASKS[:6])
    c.save_tasks(TASKS[:6])
    _record(a, "a", {"t0": 1, "t1": 1, "t2": 1, "t3": 1, "t4": 1, "t5": 0, "t6": 1})
    _record(b, "b", {"t0": 1, "t1": 1, "t2": 1, "t3": 0, "t4": 0, "t5": 0})
    _record(c, "c", {"t0": 1, "t1": 1, "t2": 0, "t3": 1, "t4": 0, "t5": 0})
    _record(c, "d", {"t0": 1, "t1": 0})
    for s in (a, b, c):
        s.close()
    return dirs


def test_matrix_is_scored_over_common_tasks(runs: list[Path]) -> None:
    rm = load_matrix(runs)
    assert rm.systems == ["a", "b", "c", "d"]
    assert rm.items == ITEMS
    np.testing.assert_array_equal(rm.values, EXPECTED)


def test_difficulty_by_hand() -> None:
    # p_j = column sums / 4 systems: 4/4, 3/4, 2/4, 2/4, 1/4, 0/4
    np.testing.assert_allclose(difficulty(EXPECTED), [1.0, 0.75, 0.5, 0.5, 0.25, 0.0])


def test_discrimination_by_hand_and_against_corrcoef() -> None:
    r = discrimination(EXPECTED)
    # t0 and t5 are constant: a correlation is undefined.
    assert math.isnan(r[0]) and math.isnan(r[5])
    # t1: X = [1,1,1,0], rest = totals - X = [5,3,3,1] - X = [4,2,2,1]
    #   dx = [.25,.25,.25,-.75], dy = [1.75,-.25,-.25,-1.25] (mean 2.25)
    #   sum dx*dy = .4375 - .0625 - .0625 + .9375 = 1.25; sxx = .75; syy = 4.75
    assert r[1] == pytest.approx(1.25 / math.sqrt(0.75 * 4.75))
    # t2: X = [1,1,0,0], rest = [4,2,3,1]; dx = ±.5, dy = [1.5,-.5,.5,-1.5]; sum = 1; sxx = 1; syy = 5
    assert r[2] == pytest.approx(1 / math.sqrt(5))
    # t3: X = [1,0,1,0], rest = [4,3,2,1]; dy = [1.5,.5,-.5,-1.5]; sum = 1; sxx = 1; syy = 5
    assert r[3] == pytest.approx(1 / math.sqrt(5))
    # t4: X = [1,0,0,0], rest = [4,3,3,1]; dx = [.75,-.25,-.25,-.25], dy = [1.25,.25,.25,-1.75]
    #   sum = .9375 - .0625 - .0625 + .4375 = 1.25; sxx = .75; syy = 4.75
    assert r[4] == pytest.approx(1.25 / math.sqrt(0.75 * 4.75))
    totals = EXPECTED.sum(axis=1)
    for j in (1, 2, 3, 4):
        rest = totals - EXPECTED[:, j]
        assert r[j] == pytest.approx(np.corrcoef(EXPECTED[:, j], rest)[0, 1])
    # Uncorrected (item included in the total) would be higher: the correction matters.
    assert np.corrcoef(EXPECTED[:, 1], totals)[0, 1] > r[1] + 0.1


def test_unscored_cells_are_left_out_not_counted_wrong() -> None:
    m = EXPECTED.copy()
    m[0, 1] = np.nan  # system a not scored on t1
    p = difficulty(m)
    assert p[1] == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3 scored systems
    r = discrimination(m)
    # t1 over b, c, d: X = [1,1,0]; rest = mean of other scored items x 5: [2,2,1]: X tracks rest exactly
    assert r[1] == pytest.approx(1.0)
    # a constant rest-score makes r undefined too
    flat = np.array([[1, 1, 0], [0, 1, 1]], dtype=np.float64)  # rest of item 0: [1, 2]; of item 1: [1, 1]
    assert math.isnan(discrimination(flat)[1])


def test_kappa_by_hand() -> None:
    kappas, counts = kappa_matrix(EXPECTED)
    # a vs b: agree on t0,t1,t2,t5 -> p_o = 4/6; p_a = 5/6, p_b = 1/2
    #   p_e = 5/6*1/2 + 1/6*1/2 = 1/2; kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert kappas[0, 1] == pytest.approx(1 / 3) and kappas[1, 0] == kappas[0, 1]
    # b vs c: agree on t0,t1,t4,t5 -> p_o = 4/6; p_b = p_c = 1/2, p_e = 1/2; kappa = 1/3
    assert kappas[1, 2] == pytest.approx(1 / 3)
    # a vs d: agree on t0,t5 -> p_o = 1/3; p_a = 5/6, p_d = 1/6
    #   p_e = 5/36 + 5/36 = 5/18; kappa = (1/3 - 5/18) / (13/18) = 1/13
    assert kappas[0, 3] == pytest.approx(1 / 13)
    assert np.allclose(np.diag(kappas), 1.0) and (counts == 6).all()

    def hand(x: list[int], y: list[int]) -> float:
        n = len(x)
        both_right = sum(1 for u, v in zip(x, y, strict=True) if u and v)
        both_wrong = sum(1 for u, v in zip(x, y, strict=True) if not u and not v)
        po = (both_right + both_wrong) / n
        pe = (sum(x) / n) * (sum(y) / n) + (1 - sum(x) / n) * (1 - sum(y) / n)
        return (po - pe) / (1 - pe)

    rows = EXPECTED.astype(int).tolist()
    for i in range(4):
        for j in range(4):
            assert kappas[i, j] == pytest.approx(hand(rows[i], rows[j]))


def test_kappa_binarises_partial_credit_and_skips_unscored() -> None:
    m = np.array([[0.5, 0.0, 1.0, np.nan], [1.0, 0.0, 0.0, 1.0]])
    kappas, counts = kappa_matrix(m)
    # over t0..t2: x = [1,0,1], y = [1,0,0]; p_o = 2/3; p_x = 2/3, p_y = 1/3
    #   p_e = 2/9 + 2/9 = 4/9; kappa = (2/3 - 4/9) / (5/9) = 2/5
    assert counts[0, 1] == 3 and kappas[0, 1] == pytest.approx(0.4)
    assert math.isnan(cohen_kappa([1, 1], [1, 1]))  # p_e = 1: undefined, not 1


def test_bins_and_sentinels_follow_appendix_d() -> None:
    assert is_sentinel(0.1) and is_sentinel(0.0) and not is_sentinel(0.1000001)
    assert [difficulty_bin(x) for x in (0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 0.9, 1.0)] == [0, 0, 1, 2, 3, 6, 7, 8]
    assert difficulty_bin(0.05) is None and difficulty_bin(math.nan) is None


def test_splits_by_hand() -> None:
    p, r = difficulty(EXPECTED), discrimination(EXPECTED)
    picks = set()
    for seed in range(20):
        sp = build_splits(p, r, 3, 1, seed=seed)
        # test: round(0.2*3) = 1 sentinel (t5, p = 0); 2 from bins holding [t4], [t2,t3], [t1], [t0]
        # (counts 1,2,1,1 of 5 -> exact quotas .4,.8,.4,.4 -> the .8 bin, then the lowest .4 bin);
        # order: sentinels, then bins from hard to easy
        assert sp.test[0] == 5 and sp.test[1] == 4 and sp.test[2] in (2, 3)
        # dev: no sentinel (round(0.2) = 0); one each of bins 3, 6, 8 left -> ties go to the lowest bin
        assert sp.dev == [5 - sp.test[2]]
        assert sp.train == [0, 1] and sp.sentinel_pool == [5]
        picks.add(sp.test[2])
        assert build_splits(p, r, 3, 1, seed=seed) == sp  # deterministic under a seed
    assert picks == {2, 3}  # t2 and t3 tie on r: the seed breaks the tie, both ways over 20 seeds
    # Spearman: test means a=2/3, b and c = 1/3 and 0 (either way), d=0 -> ranks [4,3,1.5,1.5];
    # full means [5/6,1/2,1/2,1/6] -> ranks [4,2.5,2.5,1]; rho = 3.75 / sqrt(4.5*4.5) = 5/6
    assert ranking_agreement(EXPECTED, [5, 2, 4]) == pytest.approx(5 / 6)
    assert ranking_agreement(EXPECTED, [5, 3, 4]) == pytest.approx(5 / 6)
    with pytest.raises(UserError, match="exceeds the 6 scored items"):
        build_splits(p, r, 5, 2)


def test_splits_on_a_larger_matrix_respect_the_rules() -> None:
    rng = np.random.default_rng(7)
    ability = np.linspace(0.05, 0.95, 12)
    hardness = rng.uniform(0, 1, 300)
    m = (rng.uniform(0, 1, (12, 300)) < ability[:, None] * (1.2 - hardness[None, :])).astype(float)
    m[:, :40] = 0.0  # 40 items no system solves
    p, r = difficulty(m), discrimination(m)
    sp = build_splits(p, r, 100, 40, seed=3)
    assert len(sp.test) == 100 and len(sp.dev) == 40 and len(sp.train) == 160
    assert set(sp.test).isdisjoint(sp.dev) and set(sp.test).isdisjoint(sp.train) and set(sp.dev).isdisjoint(sp.train)
    assert sorted(sp.test + sp.dev + sp.train) == list(range(300))
    assert sum(is_sentinel(p[j]) for j in sp.test) == 20  # 20% of the test set
    assert sum(is_sentinel(p[j]) for j in sp.dev) == 8
    # Greedy within bins: every test item beats every unchosen item of its bin on discrimination.
    chosen = set(sp.test)
    for j in sp.test:
        b = difficulty_bin(p[j])
        if b is None or math.isnan(r[j]):
            continue
        left = [r[k] for k in range(300) if k not in chosen and difficulty_bin(p[k]) == b and not math.isnan(r[k])]
        assert all(r[j] >= x for x in left)
    assert build_splits(p, r, 100, 40, seed=3) == sp
    assert ranking_agreement(m, sp.test) > 0.85


def test_cli_writes_json_and_png(runs: list[Path], tmp_path: Path) -> None:
    dirs = [str(d) for d in runs]
    out, png = tmp_path / "out" / "items.json", tmp_path / "items.png"
    proc = run_cli("analyse", "items", *dirs, "--output", str(out), "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["systems"] == ["a", "b", "c", "d"] and rep["n_items"] == 6
    assert rep["system_accuracy"] == pytest.approx([5 / 6, 1 / 2, 1 / 2, 1 / 6])
    assert [i["difficulty"] for i in rep["items"]] == [1.0, 0.75, 0.5, 0.5, 0.25, 0.0]
    assert rep["items"][0]["discrimination"] is None and rep["items"][5]["sentinel"] is True
    assert rep["items"][2]["discrimination"] == pytest.approx(1 / math.sqrt(5))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    out, png = tmp_path / "splits.json", tmp_path / "splits.png"
    proc = run_cli("analyse", "splits", *dirs, "--test", "3", "--dev", "1", "--seed", "1", "--output", str(out), "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["test"][:2] == ["t5", "t4"] and rep["train"] == ["t0", "t1"]
    assert set(rep["test"] + rep["dev"] + rep["train"]) == set(ITEMS)
    assert rep["summary"]["test"]["n_sentinel"] == 1 and rep["sentinel_pool"] == 1
    assert rep["summary"]["test"]["spearman_vs_full"] == pytest.approx(5 / 6)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    proc2 = run_cli("analyse", "splits", *dirs, "--test", "3", "--dev", "1", "--seed", "1", "--output", str(tmp_path / "s2.json"))
    assert proc2.returncode == 0 and (tmp_path / "s2.json").read_bytes() == out.read_bytes()

    out, png = tmp_path / "agreement.json", tmp_path / "agreement.png"
    proc = run_cli("analyse", "agreement", *dirs, "--output", str(out), "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["kappa"][0][1] == pytest.approx(1 / 3) and rep["kappa"][0][3] == pytest.approx(1 / 13)
    assert rep["n_items"][0][1] == 6
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["items", "{missing}", "--output", "{out}"], "does not exist"),
        (["items", "{empty}", "--output", "{out}"], "is not a deskbench run"),
        (["splits", "{A}", "--test", "6", "--dev", "2", "--output", "{out}"], "exceeds the 7 scored items"),
        (["agreement", "{A}", "{other}", "--output", "{out}"], "share no tasks"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(runs: list[Path], tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    other = RunStore(tmp_path / "other")
    other.save_tasks([DocQATask(id="x", question="?", answer_variants=[["y"]])])
    _record(other, "e", {"x": 1})
    other.close()
    subs = {"missing": str(tmp_path / "nope"), "empty": str(tmp_path / "empty"), "out": str(tmp_path / "o.json"),
            "A": str(runs[0]), "other": str(tmp_path / "other")}
    proc = run_cli("analyse", *[a.format(**subs) for a in args])
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()
