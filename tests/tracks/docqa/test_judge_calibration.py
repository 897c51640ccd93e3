"""Judge calibration: q0, q1, m0, m1 by hand, the partial rule, the seeded stratified sample, and
`deskbench score --judge-calibration` applying them in the Rogan-Gladen correction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI
from test_llm_judge import verdict

from deskbench.analysis.stats import wilson_interval
from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.scoring.judge_calibration import (
    CalibrationItem,
    HumanLabel,
    calibration,
    read_labels,
    sample_items,
)
from deskbench.tracks.docqa.scoring.bias import rogan_gladen
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

T0 = "2026-01-01T00:00:00Z"


def _label(item: str, label: str, who: str = "ann", ts: str = T0) -> HumanLabel:
    return HumanLabel(item_id=item, labeller=who, label=label, timestamp=ts)  # type: ignore[arg-type]


def test_q0_q1_m0_m1_by_hand() -> None:
    # human correct: a b c d e (judge 1 1 1 1 0) -> tp 4, fn 1, m1 5, q1 4/5
    # human incorrect: f g h (judge 0 0 1)       -> tn 2, fp 1, m0 3, q0 2/3
    verdicts = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 0.0, "f": 0.0, "g": 0.0, "h": 1.0,
                "u": 1.0}  # u: not labelled
    labels = [_label(i, "correct") for i in "abcde"] + [_label(i, "incorrect") for i in "fgh"]
    cal = calibration(labels, verdicts)
    assert (cal.q1, cal.q0, cal.m1, cal.m0) == (pytest.approx(4 / 5), pytest.approx(2 / 3), 5, 3)
    assert (cal.tp, cal.fn, cal.tn, cal.fp) == (4, 1, 2, 1)
    assert cal.n_labelled == 8 and cal.n_unlabelled == 1 and cal.n_partial == 0
    assert cal.q1_ci == pytest.approx(wilson_interval(4, 5)) and cal.q0_ci == pytest.approx(wilson_interval(2, 3))


def test_partial_counts_half_and_latest_label_wins() -> None:
    # a: human correct, judge partial -> tp 0.5, fn 0.5; b: human correct, judge 1 -> tp 1
    # c: human incorrect, judge partial -> fp 0.5, tn 0.5; d: human incorrect, judge 0 -> tn 1
    verdicts = {"a": 0.5, "b": 1.0, "c": 0.5, "d": 0.0, "e": None, "f": 1.0}
    labels = [
        _label("a", "incorrect", ts="2026-01-01T00:00:00Z"),
        _label("a", "correct", ts="2026-01-02T00:00:00Z"),  # relabel: replaces the first
        _label("b", "correct"), _label("c", "incorrect"), _label("d", "incorrect"),
        _label("e", "correct"),  # judge left it unscored: excluded, counted
        _label("f", "correct", who="ann"), _label("f", "incorrect", who="bob"),  # disagreement
    ]
    cal = calibration(labels, verdicts)
    assert (cal.tp, cal.fn, cal.tn, cal.fp) == (1.5, 0.5, 1.5, 0.5)
    assert cal.q1 == pytest.approx(0.75) and cal.q0 == pytest.approx(0.75)
    assert (cal.m1, cal.m0, cal.n_partial, cal.n_no_verdict, cal.n_disagreed) == (2, 2, 2, 1, 1)
    assert cal.labellers == ["ann", "bob"]


def _item(i: int, v: float | None, source: str | None = "judge") -> CalibrationItem:
    return CalibrationItem(id=f"r/s/t{i:03d}", task_id=f"t{i:03d}", run="r", system="s", question="q?",
                           answer_variants=[["a"]], prediction=["p"], judge_verdict=v,
                           verdict_source=source)  # type: ignore[arg-type]


def test_sample_is_deterministic_per_seed_and_stratified() -> None:
    # 90 judged correct, 8 incorrect, 2 partial, 5 unscored: proportional allocation for n=20
    items = ([_item(i, 1.0) for i in range(90)] + [_item(100 + i, 0.0) for i in range(8)]
             + [_item(200 + i, 0.5) for i in range(2)] + [_item(300 + i, None) for i in range(5)])
    a, b = sample_items(items, 20, seed=3), sample_items(items, 20, seed=3)
    assert [i.id for i in a] == [i.id for i in b] and len(a) == 20
    assert [i.id for i in sample_items(items, 20, seed=4)] != [i.id for i in a]
    counts = {v: sum(1 for i in a if i.judge_verdict == v) for v in (1.0, 0.5, 0.0)}
    # quotas 18, 1.6, 0.4: floors 18, 1 and the at-least-one floor 1
    assert counts == {1.0: 18, 0.0: 1, 0.5: 1}
    assert all(i.judge_verdict is not None for i in a)  # unscored items are not sampled
    # without verdicts: a plain random sample, still seeded
    plain = [_item(i, None, source=None) for i in range(50)]
    assert [i.id for i in sample_items(plain, 10, 1)] == [i.id for i in sample_items(plain, 10, 1)]
    assert len(sample_items(plain, 500, 1)) == 50


def test_bad_label_lines_name_file_line_and_field(tmp_path: Path) -> None:
    items = [_item(1, 1.0)]
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps({"item_id": "r/s/t001", "labeller": "ann", "label": "correct"}) + "\n"
                   + json.dumps({"item_id": "r/s/t001", "labeller": "ann", "label": "maybe"}) + "\n")
    with pytest.raises(UserError, match=r"labels.jsonl:2: field 'label'"):
        read_labels(bad, items)
    bad.write_text(json.dumps({"item_id": "nope", "labeller": "ann", "label": "correct"}) + "\n")
    with pytest.raises(UserError, match=r"labels.jsonl:1: field 'item_id': 'nope' is not an item"):
        read_labels(bad, items)


# -- end to end: a run, a scripted judge, sample -> labels -> compute -> score ------------------

TASKS = [DocQATask(id=f"t{i}", question=f"Question {i}?", answer_variants=[[f"gold answer {i}"]]) for i in range(10)]


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    store = RunStore(run)
    store.save_tasks(TASKS)
    for i, task in enumerate(TASKS):  # t0-t3 exact; t4-t9 wrong strings that go to the judge
        answer = f"gold answer {i}" if i < 4 else f"something else entirely {i}"
        store.record(Episode(task_id=task.id, system="sys", status="ok",
                             submission=DocQASubmission(id=task.id, answer=[answer], citations=[])))
    store.close()
    return run


def _script(body: dict, n: int) -> dict:
    """The judge: correct for questions 4-6, partial for 7, incorrect for 8-9."""
    prompt = body["messages"][0]["content"]
    q = int(prompt.split("Question ")[1].split("?")[0])
    return verdict("correct" if q <= 6 else "partial" if q == 7 else "incorrect")


def test_sample_compute_and_score_with_the_calibration(tmp_path: Path) -> None:
    run = _run(tmp_path)
    items_path, labels_path, cal_path = tmp_path / "items.jsonl", tmp_path / "labels.jsonl", tmp_path / "cal.json"
    with FakeOpenAI(script=_script) as fake:
        judge = f"openai-compat/judge-model@{fake.base_url}"
        proc = run_cli("calibrate", "sample", str(run), "--output", str(items_path), "--num-items", "10", "--seed", "0",
                       "--judge", judge, "--no-cache")
        assert proc.returncode == 0, proc.stderr
        assert len(fake.requests) == 6  # exact answers never reach the judge
        items = [json.loads(line) for line in items_path.read_text().splitlines()]
        verdicts = {it["task_id"]: (it["judge_verdict"], it["verdict_source"]) for it in items}
        assert verdicts["t0"] == (1.0, "exact") and verdicts["t7"] == (0.5, "judge") and verdicts["t9"] == (0.0, "judge")
        # humans: t0-t4 correct, t5-t9 incorrect ->
        # human correct t0-t4: judge 1,1,1,1,1 -> tp 5, m1 5, q1 1
        # human incorrect t5-t9: judge 1,1,0.5,0,0 -> fp 2.5, tn 2.5, m0 5, q0 0.5
        labels_path.write_text("".join(
            json.dumps({"item_id": it["id"], "labeller": "ann", "timestamp": T0,
                        "label": "correct" if int(it["task_id"][1:]) <= 4 else "incorrect"}) + "\n" for it in items))
        proc = run_cli("calibrate", "compute", str(items_path), str(labels_path), "--json")
        assert proc.returncode == 0, proc.stderr
        cal = json.loads(proc.stdout)
        assert (cal["q1"], cal["q0"], cal["m1"], cal["m0"], cal["n_partial"]) == (1.0, 0.5, 5, 5, 1)
        text = run_cli("calibrate", "compute", str(items_path), str(labels_path))
        assert text.returncode == 0 and "q0 (specificity) 0.500" in text.stdout
        cal_path.write_text(proc.stdout)

        base = ["score", str(run), "--json", "--judge", judge, "--no-cache"]
        plain = json.loads(run_cli(*base).stdout)["sys"]
        calibrated = run_cli(*base, "--judge-calibration", str(cal_path))
        assert calibrated.returncode == 0, calibrated.stderr
        r = json.loads(calibrated.stdout)["sys"]
    # raw judged accuracy: (4 exact + 3 correct + 0.5 partial) / 10 = 0.75
    assert r["accuracy"] == pytest.approx(0.75) == plain["accuracy"]
    bc = r["bias_corrected"]
    assert (bc["q0"], bc["q1"], bc["m0"], bc["m1"]) == (0.5, 1.0, 5, 5)
    assert bc["accuracy"] == pytest.approx(rogan_gladen(0.75, 0.5, 1.0)) == pytest.approx(0.5)
    assert plain["bias_corrected"]["accuracy"] == pytest.approx(rogan_gladen(0.75))


def test_cli_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"q1": 1.0, "q0": 0.5}))  # missing fields
    run = _run(tmp_path)
    proc = run_cli("score", str(run), "--judge-calibration", str(cal))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "cal.json" in proc.stderr
    proc = run_cli("score", str(run), "--judge-calibration", str(cal), "--q0", "0.9")
    assert proc.returncode == 2 and "--judge-calibration" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1

    items = tmp_path / "items.jsonl"
    items.write_text(_item(1, 1.0).model_dump_json() + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"item_id": "r/s/t001", "labeller": "ann", "label": "correct"}\nnot json\n')
    proc = run_cli("calibrate", "compute", str(items), str(labels))
    assert proc.returncode == 2, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and "labels.jsonl:2" in proc.stderr
    labels.write_text('{"item_id": "r/s/t001", "labeller": "ann", "label": "yes"}\n')
    proc = run_cli("calibrate", "compute", str(items), str(labels))
    assert proc.returncode == 2 and "labels.jsonl:1: field 'label'" in proc.stderr
