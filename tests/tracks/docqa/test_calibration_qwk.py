"""Three-way human labels in judge calibration (MADQA F.1, §3.1): "partial" read beside the two-way
labels, left out of q0 / q1 and counted, and the judge's quadratic-weighted kappa against the people
with exact matches left out, computed by hand; the CLI prints it, the web screen takes a partial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.scoring.judge_calibration import (
    CalibrationItem,
    HumanLabel,
    calibration,
    calibration_of,
    quadratic_weighted_kappa,
    read_labels,
)

T0 = "2026-01-01T00:00:00Z"


def _label(item: str, label: str, who: str = "ann") -> HumanLabel:
    return HumanLabel(item_id=item, labeller=who, label=label, timestamp=T0)


def _item(name: str, verdict: float, source: str = "judge", category: str | None = None) -> CalibrationItem:
    return CalibrationItem(id=f"r/s/{name}", task_id=name, run="r", system="s", question=f"{name}?",
                           answer_variants=[["gold"]], prediction=["p"], judge_verdict=verdict,
                           verdict_source=source, judge="j", category=category)


# (item, person, judge verdict, source). On incorrect 0 < partial 1 < correct 2 the judged pairs are
# a (2,2) b (2,1) c (1,1) d (0,0) e (0,2) f (1,2); x is an exact match the person calls incorrect
# (left out of the kappa, as MADQA leaves exact matches out).
# Observed O: one each at (2,2) (2,1) (1,1) (0,0) (0,2) (1,2); weights (i-j)^2/4: 0.25 one apart, 1 two apart.
#   sum w O = 0.25 (2,1) + 1 (0,2) + 0.25 (1,2) = 1.5
# Marginals: person 2, 2, 2; judge 1, 2, 3; N = 6, so E_ij = 2 * judge_j / 6 = judge_j / 3.
#   row 0: 0.25 * 2/3 + 1 * 3/3 = 7/6; row 1: 0.25 * 1/3 + 0.25 * 3/3 = 1/3; row 2: 1 * 1/3 + 0.25 * 2/3 = 1/2
#   sum w E = 7/6 + 1/3 + 1/2 = 2  ->  kappa = 1 - 1.5 / 2 = 0.25
# q0 / q1 leave the people's partials (c, f) out: person-correct a (1), b (0.5) -> tp 1.5, m1 2;
# person-incorrect d (0), e (1), x (1) -> tn 1, fp 2, m0 3.
CASES = [("a", "correct", 1.0, "judge"), ("b", "correct", 0.5, "judge"), ("c", "partial", 0.5, "judge"),
         ("d", "incorrect", 0.0, "judge"), ("e", "incorrect", 1.0, "judge"), ("f", "partial", 1.0, "judge"),
         ("x", "incorrect", 1.0, "exact")]


def test_qwk_by_hand() -> None:
    assert quadratic_weighted_kappa([2, 2, 1, 0, 0, 1], [2, 1, 1, 0, 2, 2]) == pytest.approx(0.25)
    assert quadratic_weighted_kappa([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)
    # one disagreement two classes apart among 2: O (0,2); marginals person 1,0,1, judge 0,0,2
    # sum w O = 1; E = person_i * judge_j / 2: (0,2) 1, (2,2) 1 -> sum w E = 1 -> kappa 0
    assert quadratic_weighted_kappa([0, 2], [2, 2]) == pytest.approx(0.0)
    assert quadratic_weighted_kappa([], []) is None
    assert quadratic_weighted_kappa([2, 2], [2, 2]) is None  # chance predicts no disagreement


def test_three_way_labels_kappa_and_q() -> None:
    items = [_item(name, v, source) for name, _, v, source in CASES]
    labels = [_label(f"r/s/{name}", label) for name, label, _, _ in CASES]
    cal = calibration_of(items, labels)
    assert cal.qwk == pytest.approx(0.25) and cal.qwk_n == 6
    assert cal.n_human_partial == 2
    assert (cal.m1, cal.m0, cal.tp, cal.fn, cal.tn, cal.fp) == (2, 3, 1.5, 0.5, 1.0, 2.0)
    assert cal.q1 == pytest.approx(0.75) and cal.q0 == pytest.approx(1 / 3)
    assert cal.n_labelled == 5
    # the exact match counted in would move the kappa: it is left out only because of its source
    with_exact = calibration(labels, {i.id: i.judge_verdict for i in items})
    assert with_exact.qwk_n == 7 and with_exact.qwk != pytest.approx(0.25)


def test_two_way_labels_still_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"item_id": "r/s/a", "labeller": "ann", "label": "correct", "timestamp": T0}) + "\n"
                    + json.dumps({"item_id": "r/s/d", "labeller": "ann", "label": "incorrect"}) + "\n"
                    + json.dumps({"item_id": "r/s/c", "labeller": "ann", "label": "partial"}) + "\n")
    labels = read_labels(path)
    assert [lab.label for lab in labels] == ["correct", "incorrect", "partial"]
    cal = calibration(labels[:2], {"r/s/a": 1.0, "r/s/d": 0.0})
    assert (cal.q1, cal.q0, cal.n_human_partial) == (1.0, 1.0, 0)
    assert cal.qwk == pytest.approx(1.0) and cal.qwk_n == 2


def test_compute_prints_the_kappa(tmp_path: Path) -> None:
    items, labels = tmp_path / "items.jsonl", tmp_path / "labels.jsonl"
    items.write_text("".join(_item(name, v, source).model_dump_json() + "\n" for name, _, v, source in CASES))
    labels.write_text("".join(_label(f"r/s/{name}", label).model_dump_json() + "\n" for name, label, _, _ in CASES))
    proc = run_cli("calibrate", "compute", str(items), str(labels), "--json")
    assert proc.returncode == 0, proc.stderr
    cal = json.loads(proc.stdout)
    assert cal["qwk"] == pytest.approx(0.25) and cal["qwk_n"] == 6 and cal["n_human_partial"] == 2
    text = run_cli("calibrate", "compute", str(items), str(labels))
    assert text.returncode == 0, text.stderr
    assert "quadratic-weighted kappa 0.250 over 6 items" in text.stdout
    assert "labelled partial by people: 2" in text.stdout
