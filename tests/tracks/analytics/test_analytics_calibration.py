"""Judge calibration for analytics runs (AIDABench §3.3.4): an analytics run scored by a scripted
QA and chart judge (tests/fake_openai.py) and the file comparator, sampled with `deskbench
calibrate sample`, labelled by a labels file, computed: agreement, q0, q1 per category equal the
hand-computed ones; the labelling screens show analytics items over HTTP; old docqa items files
still load."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI
from test_analytics_evaluators import bar_png, readability

from deskbench.analysis.stats import wilson_interval
from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.scoring.judge_calibration import Calibration, calibration_of, read_items, read_labels
from deskbench.tracks.analytics.tasks import (
    AnalyticsSubmission,
    AnalyticsTask,
    ChartSeries,
    ChartSpec,
    OutputFileRecord,
    ReferenceFile,
    SheetSpec,
    write_tasks,
)
from deskbench.web.calibration import LABELS_FILE, create_calibration_app
from tests.web.test_web import Client, serve

T0 = "2026-01-01T00:00:00Z"
SYSTEM = "analyst-agent:m"
RUBRIC = ["bar chart", "bars North, East, West", "North is 12.5"]

# The scripted judges, by task:
# qa q0-q2 judged 1, q3-q5 judged 0; charts: c0 3/3 rubric items, c1 2/3, c2 3/3 (C = 1 -> verdict 1);
# files: f0 is the reference (the comparator passes it), f1 has the wrong columns (fails).
JUDGED = {"q0": 1, "q1": 1, "q2": 1, "q3": 0, "q4": 0, "q5": 0, "c0": 3, "c1": 2, "c2": 3}
# The humans: qa q0, q1, q3 correct; charts c0 correct; files f0 correct; the rest incorrect.
HUMAN = {"q0": "correct", "q1": "correct", "q2": "incorrect", "q3": "correct", "q4": "incorrect",
         "q5": "incorrect", "c0": "correct", "c1": "incorrect", "c2": "incorrect", "f0": "correct",
         "f1": "incorrect"}


def _xlsx(path: Path, columns: list[str], rows: list[list[Any]]) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Summary"
    ws.append(columns)
    for r in rows:
        ws.append(r)
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)


def _tasks(root: Path) -> list[AnalyticsTask]:
    qa = [AnalyticsTask(id=f"q{i}", category="qa", instruction=f"Question number {i}: what is the total <b>?",
                        inputs=["x.xlsx"], difficulty_steps=3, answer=f"{100 + i}.5", answer_value=100.5 + i,
                        key_points=[f"keypoint-{i}"]) for i in range(6)]
    charts = [AnalyticsTask(id=f"c{i}", category="visualization", inputs=["x.xlsx"], difficulty_steps=4,
                            instruction=f"Chart number {i}: draw revenue by region, save it as chart.png.",
                            chart=ChartSpec(chart_type="bar", series=[ChartSeries(
                                name="Revenue", labels=["North", "East", "West"], values=[12.5, 9.0, 4.25])]),
                            key_points=RUBRIC) for i in range(3)]
    _xlsx(root / "reference" / "summary.xlsx", ["Region", "Total"], [["North", 12.5], ["East", 9.0]])
    ref = ReferenceFile(path="reference/summary.xlsx", output_name="summary.xlsx",
                        sheets=[SheetSpec(name="Summary", columns=["Region", "Total"], rows=2)])
    files = [AnalyticsTask(id=f"f{i}", category="file_generation", inputs=["x.xlsx"], difficulty_steps=5,
                           instruction=f"File number {i}: save totals by region as summary.xlsx.",
                           reference_file=ref) for i in range(2)]
    broken = AnalyticsTask(id="e0", category="qa", instruction="Question number 9: never answered?", inputs=["x.xlsx"],
                           difficulty_steps=3, answer="1")
    return qa + charts + files + [broken]


def _outputs(run: Path, task_id: str, files: dict[str, bytes]) -> AnalyticsSubmission:
    """Attempt 0's files, in its own folder (the only one scoring reads: runs/outputs.py)."""
    from deskbench.runs.runner import episode_dir

    rel = (episode_dir(run, SYSTEM, task_id, 0) / "result").relative_to(run).as_posix()
    records = []
    for name, data in files.items():
        (run / rel).mkdir(parents=True, exist_ok=True)
        (run / rel / name).write_bytes(data)
        records.append(OutputFileRecord(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return AnalyticsSubmission(id=task_id, answer=f"Final answer for {task_id}", files=records, files_dir=rel,
                               rounds=2)


def make_run(root: Path) -> Path:
    tasks = _tasks(root)
    write_tasks(root / "tasks.jsonl", tasks)
    run = root / "run"
    store = RunStore(run)
    store.save_tasks(tasks)
    store.set_meta("tasks_file", str(root / "tasks.jsonl"))
    png = bar_png()
    wrong = root / "wrong.xlsx"
    _xlsx(wrong, ["Name", "Amount", "Extra"], [["x", 1, 2]])
    for t in tasks[:-1]:  # e0 ends in an error, below
        if t.category == "qa":
            sub = AnalyticsSubmission(id=t.id, answer=f"My answer <i>{t.id}</i>\nFinal answer: 7", rounds=1)
        elif t.category == "visualization":
            sub = _outputs(run, t.id, {"chart.png": png})
        else:
            data = (root / "reference" / "summary.xlsx").read_bytes() if t.id == "f0" else wrong.read_bytes()
            sub = _outputs(run, t.id, {"summary.xlsx": data})
        store.record(Episode(task_id=t.id, system=SYSTEM, status="ok", submission=sub))
        # attempt 1 is never sampled (attempt 0 only, as for docqa)
        store.record(Episode(task_id=t.id, system=SYSTEM, attempt=1, status="ok", submission=sub))
    # an episode that ended in an error has nothing to judge: not an item
    store.record(Episode(task_id="e0", system=SYSTEM, status="error", error="boom"))
    store.close()
    return run


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The QA judge (Listing 2) and the chart judges (Listings 3, 4), by the task's number."""
    blob = json.dumps(body)
    if "Chart Correctness Scorer" in blob:
        k = int(re.search(r"Chart number (\d+)", blob).group(1))  # type: ignore[union-attr]
        reply = {"correct_number_of_rubric_items": JUDGED[f"c{k}"], "total_number_of_rubric_items": 3,
                 "reason": f"chart {k}"}
    elif "image_url" in blob:  # readability (Listing 4 names no task)
        reply = readability(8)
    else:
        k = int(re.search(r"Question number (\d+)", blob).group(1))  # type: ignore[union-attr]
        reply = {"score": JUDGED[f"q{k}"], "reason": f"CHART-OR-QA-REASON-{k}"}
    return {"kind": "text", "text": json.dumps(reply)}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ancal")
    run = make_run(root)
    items_path = root / "items.jsonl"
    import os

    env_cache = os.environ.get("DESKBENCH_CACHE_DIR")
    os.environ["DESKBENCH_CACHE_DIR"] = str(root / "cache")
    try:
        with FakeOpenAI(script=script) as fake:
            judge = f"openai-compat/judge-model@{fake.base_url}"
            proc = run_cli("calibrate", "sample", str(run), "--output", str(items_path), "--num-items", "50", "--seed", "0",
                           "--judge", judge)
            requests = len(fake.requests)
            qa_only = root / "qa.jsonl"
            cat = run_cli("calibrate", "sample", str(run), "--output", str(qa_only), "--num-items", "4", "--seed", "1",
                          "--judge", judge, "--category", "qa")
    finally:
        if env_cache is None:
            os.environ.pop("DESKBENCH_CACHE_DIR", None)
        else:
            os.environ["DESKBENCH_CACHE_DIR"] = env_cache
    assert proc.returncode == 0, proc.stderr
    assert cat.returncode == 0, cat.stderr
    labels = root / "labels.jsonl"
    labels.write_text("".join(json.dumps({"item_id": f"run/{SYSTEM}/{t}", "labeller": "ann", "label": lab,
                                          "timestamp": T0}) + "\n" for t, lab in HUMAN.items()))
    return {"root": root, "run": run, "items": items_path, "labels": labels, "qa_only": qa_only,
            "requests": requests, "stdout": proc.stdout, "judge": judge}


def test_sample_carries_what_a_person_needs_and_the_deciding_verdict(sampled: dict[str, Any]) -> None:
    items = {i.task_id: i for i in read_items(sampled["items"])}
    assert sorted(items) == sorted(HUMAN)  # attempt 0 only, 11 items
    assert "1 left out (no evaluator)" in sampled["stdout"]
    # 6 QA answers (Listing 2 once each) and 3 charts x 2 (Listings 3, 4); no call for files
    assert sampled["requests"] == 6 + 3 * 2
    q0, c1, c2, f0, f1 = items["q0"], items["c1"], items["c2"], items["f0"], items["f1"]
    assert q0.track == "analytics" and q0.category == "qa" and q0.reference == "100.5"
    assert q0.key_points == ["keypoint-0"] and "Final answer: 7" in (q0.answer or "")
    assert (q0.judge_verdict, q0.verdict_source, q0.judge) == (1.0, "judge", "openai-compat/judge-model")
    assert items["q4"].judge_verdict == 0.0
    # charts: C = 1 is the verdict; S and C kept
    assert (c1.judge_verdict, c1.chart_correctness, c1.verdict_source) == (0.0, pytest.approx(2 / 3), "chart_judge")
    assert c1.judge_score == pytest.approx(0.7 * 2 / 3 + 0.3)
    assert (c2.judge_verdict, c2.judge_score) == (1.0, 1.0)
    assert c2.chart_path and Path(c2.chart_path).is_file() and c2.key_points == RUBRIC
    # files: the comparator decided
    assert (f0.judge_verdict, f0.verdict_source, f0.judge) == (1.0, "comparator", "file comparator")
    assert f1.judge_verdict == 0.0
    assert f1.output_file and Path(f1.output_file).is_file() and f1.output_file.endswith("/0/result/summary.xlsx")
    assert f1.reference_file and Path(f1.reference_file).is_file()
    # --category qa --n 4: stratified over qa/judge/correct (3) and qa/judge/incorrect (3): 2 + 2
    qa = read_items(sampled["qa_only"])
    assert {i.category for i in qa} == {"qa"} and sorted(i.judge_verdict for i in qa) == [0.0, 0.0, 1.0, 1.0]


def test_compute_agreement_and_q_per_category_by_hand(sampled: dict[str, Any]) -> None:
    proc = run_cli("calibrate", "compute", str(sampled["items"]), str(sampled["labels"]), "--json")
    assert proc.returncode == 0, proc.stderr
    cal = json.loads(proc.stdout)
    by = cal["by_category"]
    # qa: human correct q0 q1 q3 (judge 1 1 0): tp 2, fn 1, q1 2/3; human incorrect q2 q4 q5
    # (judge 1 0 0): tn 2, fp 1, q0 2/3; agreement 4/6
    qa = by["qa"]
    assert (qa["tp"], qa["fn"], qa["tn"], qa["fp"], qa["m1"], qa["m0"]) == (2, 1, 2, 1, 3, 3)
    assert qa["q1"] == pytest.approx(2 / 3) and qa["q0"] == pytest.approx(2 / 3)
    assert qa["agreement"] == pytest.approx(4 / 6)
    assert qa["agreement_ci"] == pytest.approx(list(wilson_interval(4, 6)))
    assert qa["judge"] == "openai-compat/judge-model"
    # charts: human correct c0 (verdict 1): tp 1, q1 1; human incorrect c1 (0), c2 (1): tn 1, fp 1,
    # q0 1/2; agreement 2/3
    vz = by["visualization"]
    assert (vz["tp"], vz["fn"], vz["tn"], vz["fp"], vz["q1"], vz["q0"]) == (1, 0, 1, 1, 1.0, 0.5)
    assert vz["agreement"] == pytest.approx(2 / 3)
    # files: f0 correct (1), f1 incorrect (0): both agree
    fg = by["file_generation"]
    assert (fg["q1"], fg["q0"], fg["agreement"], fg["m1"], fg["m0"]) == (1.0, 1.0, 1.0, 1, 1)
    assert fg["judge"] == "file comparator"
    # overall: tp 4 of m1 5, tn 4 of m0 6, agreement 8/11
    assert (cal["tp"], cal["m1"], cal["tn"], cal["m0"]) == (4, 5, 4, 6)
    assert cal["q1"] == pytest.approx(0.8) and cal["q0"] == pytest.approx(4 / 6)
    assert cal["agreement"] == pytest.approx(8 / 11)
    assert cal["agreement_ci"] == pytest.approx(list(wilson_interval(8, 11)))
    text = run_cli("calibrate", "compute", str(sampled["items"]), str(sampled["labels"]))
    assert text.returncode == 0, text.stderr
    assert "agreement 0.727" in text.stdout and "-- qa:" in text.stdout and "-- visualization:" in text.stdout
    assert "agreement 0.667" in text.stdout and "C = 1" in text.stdout
    with pytest.raises(UserError, match="calibrates analytics evaluators"):  # not for docqa's Rogan-Gladen
        Calibration.model_validate(cal).for_score("cal.json")


def test_analytics_flags_are_checked(sampled: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    proc = run_cli("calibrate", "sample", str(sampled["run"]), "--output", str(out), "--category", "charts")
    assert proc.returncode == 2 and "--category 'charts'" in proc.stderr
    proc = run_cli("calibrate", "sample", str(sampled["run"]), "--output", str(out), "--no-cache")
    assert proc.returncode == 2 and "docqa runs" in proc.stderr
    # without any judge: the deterministic evaluators decide (QA check, comparator); charts unscored
    proc = run_cli("calibrate", "sample", str(sampled["run"]), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    items = read_items(out)
    assert {i.category for i in items} == {"qa", "file_generation"}
    assert "3 unscored by the judge" in proc.stdout  # the charts: no chart judge


def test_old_docqa_items_files_still_load(tmp_path: Path) -> None:
    """An items file as written before analytics items (no track, no analytics fields)."""
    old = {"id": "r/s/t1", "task_id": "t1", "run": "r", "system": "s", "question": "Q?",
           "answer_variants": [["a"]], "prediction": ["a"], "judge_verdict": 1.0, "verdict_source": "exact",
           "judge": "j", "judge_reason": "exact"}
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(old) + "\n" + json.dumps({**old, "id": "r/s/t2", "task_id": "t2",
                                                         "judge_verdict": 0.0, "verdict_source": "judge"}) + "\n")
    items = read_items(path)
    assert items[0].track == "docqa" and items[0].category is None
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"item_id": "r/s/t1", "labeller": "a", "label": "correct", "timestamp": T0}) + "\n"
                      + json.dumps({"item_id": "r/s/t2", "labeller": "a", "label": "correct", "timestamp": T0}) + "\n")
    cal = calibration_of(items, read_labels(labels, items))
    assert (cal.q1, cal.q0, cal.agreement, cal.by_category) == (0.5, None, 0.5, {})
    proc = run_cli("calibrate", "compute", str(path), str(labels), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["agreement"] == 0.5


def test_labelling_screen_shows_analytics_items_over_http(sampled: dict[str, Any], tmp_path: Path) -> None:
    run_dir = tmp_path / "web"
    token = run_cli("serve", "add-user", "gail", "--out", str(run_dir)).stdout.strip()
    items = read_items(sampled["items"])
    n_of = {i.task_id: n for n, i in enumerate(items, 1)}
    with serve(create_calibration_app(run_dir, sampled["items"])) as port:
        c = Client(port)
        assert c.request("GET", f"/calibration/{n_of['c0']}/chart")[0] == 401
        assert c.request("GET", f"/calibration/{n_of['f0']}/file/output")[0] == 401
        c.login(token)
        status, _, html = c.request("GET", f"/calibration/{n_of['q3']}")
        assert status == 200
        assert "Question number 3: what is the total &lt;b&gt;?" in html  # escaped
        assert "103.5" in html and "keypoint-3" in html and "Final answer: 7" in html
        assert "&lt;i&gt;q3&lt;/i&gt;" in html and "<i>q3" not in html
        for secret in ("CHART-OR-QA-REASON", "judge-model", SYSTEM, "verdict", "comparator", "chart_judge"):
            assert secret not in html, secret
        html = c.request("GET", f"/calibration/{n_of['c1']}")[2]
        assert f'src="/calibration/{n_of["c1"]}/chart"' in html and "bars North, East, West" in html
        assert "Rubric" in html and "chart 1" not in html  # the judge's reason is not shown
        status, headers, _ = c.request("GET", f"/calibration/{n_of['c1']}/chart")
        assert status == 200 and headers["content-type"] == "image/png"
        assert c.request("GET", f"/calibration/{n_of['q0']}/chart")[0] == 404
        html = c.request("GET", f"/calibration/{n_of['f1']}")[2]
        assert 'href="/calibration/' in html and "file/output" in html and "file/reference" in html
        status, headers, body = c.request("GET", f"/calibration/{n_of['f1']}/file/reference")
        assert status == 200 and "reference-summary.xlsx" in headers["content-disposition"]
        assert c.request("GET", f"/calibration/{n_of['f1']}/file/../../etc")[0] == 404
        assert c.request("GET", f"/calibration/{n_of['f1']}/file/other")[0] == 404
        for task_id, label in HUMAN.items():
            assert c.request("POST", f"/calibration/{n_of[task_id]}/label",
                             {"label": label, "csrf": c.csrf})[0] == 303
        html = c.request("GET", "/calibration/results")[2]
        assert 'id="by-category"' in html and 'id="cat-visualization"' in html
        assert re.search(r'id="agreement">0\.7273<', html)
        downloaded = c.request("GET", "/calibration/results.json")[2]
    proc = run_cli("calibrate", "compute", str(sampled["items"]), str(run_dir / LABELS_FILE), "--json")
    assert proc.returncode == 0, proc.stderr
    assert downloaded == proc.stdout
    cal = json.loads(downloaded)
    assert cal["by_category"]["qa"]["agreement"] == pytest.approx(4 / 6) and cal["labellers"] == ["gail"]
