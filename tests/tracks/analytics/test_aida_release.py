"""AIDABench's release, whole (issue 36 item 2a): a release in the layout `import-tasks aida`
reads (tracks/analytics/aida.py: one manifest, input/<id>/ and reference/<id>/ beside it), written
by the test with QA, chart and several-file rows, imported, run by the analyst agent (a scripted
model on the wire, tests/fake_openai.py, in the real bubblewrap sandbox) and scored, every row:
the QA row by the deterministic check, the chart row by the Listings 3-4 judges (a second scripted
model) from the question, key points and image alone (the release has no chart spec), the file
rows by the comparator, each output file on its own and the task passing only when all pass."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from conftest import run_cli
from fake_openai import FakeOpenAI
from openpyxl import Workbook

from deskbench.tracks.analytics.aida import pair_references, plain_number
from deskbench.tracks.analytics.diagnose import missing_files
from deskbench.tracks.analytics.export import task_text
from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
from deskbench.tracks.analytics.scoring.charts import DIMENSIONS
from deskbench.tracks.analytics.tasks import read_tasks
from deskbench.tracks.analytics.viewer import AnalyticsViews, analytics_shown

SALES = "region,month,sales\nNorth,Jan,70\nNorth,Feb,80\nSouth,Jan,40\nSouth,Feb,50\n"
ROWS = [
    {"id": "QA_1", "question": "What are North's total sales over both months?", "input_file": "sales.csv",
     "reference": "150", "rubrics": ["North total 150"]},
    {"id": "QA_2", "question": "Which month was best?", "input_file": "sales.csv", "reference": None},
    {"id": "DV_1", "question": "Draw a bar chart of total sales by region and save it.", "input_file": "sales.csv",
     "output_file": "sales_chart.png", "rubrics": ["bars for North and South", "North is 150", "South is 90"]},
    # names the columns wanted: relaxed; two outputs, references paired by name (reversed on purpose)
    {"id": "FG_1", "question": "Split the sales by region into north.csv and south.csv, each with the columns "
     "month, sales.", "input_file": "sales.csv", "output_file": "north.csv\nsouth.csv",
     "reference_file": "south_res.csv\nnorth_res.csv"},
    # sets the column order: strict
    {"id": "FG_2", "question": "Write totals.xlsx with the columns in this order: region, total.",
     "input_file": "sales.csv", "output_file": "totals.xlsx", "reference_file": "totals_res.xlsx"},
    # two outputs, one of them wrong in the run below: the task fails
    {"id": "FG_3", "question": "Write jan.csv and feb.csv with the columns region, sales for that month.",
     "input_file": "sales.csv", "output_file": "jan.csv;feb.csv", "reference_file": "jan_res.csv;feb_res.csv"},
]
REFERENCES = {
    ("FG_1", "north_res.csv"): "month,sales\nJan,70\nFeb,80\n",
    ("FG_1", "south_res.csv"): "month,sales\nJan,40\nFeb,50\n",
    ("FG_3", "jan_res.csv"): "region,sales\nNorth,70\nSouth,40\n",
    ("FG_3", "feb_res.csv"): "region,sales\nNorth,80\nSouth,50\n",
}
# what the scripted agent writes: FG_1 in another column order with an extra column (relaxed: pass),
# FG_2 with its columns swapped (strict: fails at structure), FG_3 with one wrong value in feb.csv
OUTPUTS = {
    "FG_1": {"north.csv": "sales,month,region\n70,Jan,North\n80,Feb,North\n",
             "south.csv": "month,sales\nJan,40\nFeb,50\n"},
    "FG_3": {"jan.csv": "region,sales\nNorth,70\nSouth,40\n", "feb.csv": "region,sales\nNorth,80\nSouth,55\n"},
}


def xlsx_bytes(rows: list[list[Any]]) -> bytes:
    wb = Workbook()
    ws = wb.active
    ws.title = "Totals"
    for r in rows:
        ws.append(r)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def bar_png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    ax.bar(["North", "South"], [150, 90])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def write_release(root: Path) -> Path:
    """An AIDA split as the release lays it out: the manifest, input/<id>/, reference/<id>/."""
    manifest = root / "AIDA_en.jsonl"
    root.mkdir(parents=True)
    manifest.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    for row in ROWS:
        (root / "input" / row["id"]).mkdir(parents=True)
        (root / "input" / row["id"] / "sales.csv").write_text(SALES, encoding="utf-8")
    for (task_id, name), body in REFERENCES.items():
        (root / "reference" / task_id).mkdir(parents=True, exist_ok=True)
        (root / "reference" / task_id / name).write_text(body, encoding="utf-8")
    (root / "reference" / "FG_2").mkdir(parents=True)
    (root / "reference" / "FG_2" / "totals_res.xlsx").write_bytes(xlsx_bytes([["region", "total"], ["North", 150],
                                                                              ["South", 90]]))
    return manifest


def tool(code: str) -> dict[str, Any]:
    return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code})}


def writes(files: dict[str, bytes]) -> str:
    lines = ["import base64"]
    lines += [f"open('/mnt/result/{name}', 'wb').write(base64.b64decode('{base64.b64encode(data).decode()}'))"
              for name, data in files.items()]
    return "\n".join(lines)


def agent_script(png: bytes) -> Any:
    totals = xlsx_bytes([["total", "region"], [150, "North"], [90, "South"]])
    files = {"DV_1": {"sales_chart.png": png}, "FG_2": {"totals.xlsx": totals},
             **{k: {n: v.encode() for n, v in d.items()} for k, d in OUTPUTS.items()}}
    by_question = {r["question"]: r["id"] for r in ROWS}

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        prompt = body["messages"][0]["content"]
        task_id = next(i for q, i in by_question.items() if q in prompt)
        if not any(m["role"] == "tool" for m in body["messages"]) and task_id in files:
            return tool(writes(files[task_id]))
        return {"kind": "text", "text": "North's total is 150." if task_id == "QA_1" else "Done."}
    return script


def chart_judge(body: dict[str, Any], n: int) -> dict[str, Any]:
    prompt = body["messages"][1]["content"][0]["text"]
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    if "Chart Correctness Scorer" in prompt:
        assert json.dumps(ROWS[2]["rubrics"]) in prompt and ROWS[2]["question"] in prompt
        reply: dict[str, Any] = {"correct_number_of_rubric_items": 2, "total_number_of_rubric_items": 3,
                                 "reason": "South's value is not labelled"}
    else:
        reply = {k: v for i, d in enumerate(DIMENSIONS) for k, v in ((d, int(i < 6)), (f"{d}_reason", "r"))}
    return {"kind": "text", "text": json.dumps(reply)}


def test_an_aida_release_is_imported_and_every_row_scored(bwrap: str, tmp_path: Path) -> None:
    manifest = write_release(tmp_path / "release")
    tasks_file = tmp_path / "tasks" / "aida.jsonl"
    proc = run_cli("import-tasks", "aida", str(manifest), "--output", str(tasks_file), "--difficulty-steps", "5")
    assert proc.returncode == 0, proc.stderr
    assert "QA_2" in proc.stderr and "no reference answer" in proc.stderr  # the only row left out, with its reason
    tasks = {t.id: t for t in read_tasks(tasks_file).items}
    assert set(tasks) == {"QA_1", "DV_1", "FG_1", "FG_2", "FG_3"}
    assert (tasks["QA_1"].answer, tasks["QA_1"].answer_value) == ("150", 150.0)
    dv = tasks["DV_1"]
    assert dv.chart is None and dv.chart_file == "sales_chart.png" and len(dv.key_points) == 3
    fg1 = tasks["FG_1"]
    assert [(o.output_name, Path(o.path).name) for o in fg1.outputs] == [("north.csv", "north_res.csv"),
                                                                          ("south.csv", "south_res.csv")]
    assert [o.strict_structure for o in fg1.outputs] == [False, False]
    assert missing_files(fg1, ["north.csv", "notes.txt"]) == ["south.csv"]  # `diagnose` names each file asked for
    fg2 = tasks["FG_2"].outputs[0]
    assert fg2.strict_structure is True and "columns in this order" in fg2.structure_reason

    run_dir = tmp_path / "run"
    items_file = tmp_path / "items.jsonl"
    with FakeOpenAI(script=agent_script(bar_png())) as agent, FakeOpenAI(script=chart_judge) as judge:
        proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(tasks_file), "--out", str(run_dir),
                       "--model", f"openai-compat/scripted@{agent.base_url}", "--concurrency", "1", "--quiet")
        assert proc.returncode == 0, proc.stderr
        proc = run_cli("score", str(run_dir), "--chart-judge", f"openai-compat/judge@{judge.base_url}",
                       "--json", "--items-out", str(items_file))
        assert proc.returncode == 0, proc.stderr
        assert len(judge.requests) == 2  # Listing 3 and Listing 4, for the one chart
    items = {i.task_id: i for i in (AnalyticsItemScore.model_validate_json(line)
                                    for line in items_file.read_text().splitlines())}
    assert set(items) == set(tasks) and all(i.status == "scored" for i in items.values())

    assert (items["QA_1"].score, items["QA_1"].source) == (1.0, "numeric")  # no --judge: the deterministic check
    chart = items["DV_1"]
    assert chart.source == "chart_judge" and chart.correctness == 2 / 3 and chart.readability == 6 / 8
    assert abs((chart.score or 0) - (0.7 * 2 / 3 + 0.3 * 6 / 8)) < 1e-9

    one = items["FG_1"]  # another column order and an extra column, under a relaxed reading: both files pass
    assert one.score == 1.0 and [(o.output_name, o.score, o.produced) for o in one.outputs] == [
        ("north.csv", 1.0, "north.csv"), ("south.csv", 1.0, "south.csv")]
    assert all(o.comparator is not None and o.comparator.mode == "tolerant" for o in one.outputs)
    two = items["FG_2"]  # the instruction set the order: swapped columns fail at structure
    assert two.score == 0.0 and two.comparator is not None and two.comparator.stage == "structure"
    assert two.comparator.mode == "strict" and "column 1 should be 'region'" in two.reason and two.outputs == []
    three = items["FG_3"]  # one file of two wrong: the task fails, the file that failed named
    assert three.score == 0.0 and [(o.output_name, o.score) for o in three.outputs] == [("jan.csv", 1.0), ("feb.csv", 0.0)]
    assert three.reason.startswith("1 of 2 files fail; feb.csv: content:") and three.error_category == "calculation"

    # what the viewer and `export` show of a several-file task: every file
    view = AnalyticsViews().task(fg1)
    assert view is not None
    assert [g for g in view.gold if g.startswith("a file")] == [f"a file {o.output_name} like {o.path}" for o in fg1.outputs]
    text = task_text(fg1)
    assert text is not None and len(text.target) == 2
    assert ("feb.csv (comparator)", f"fail: {three.outputs[1].reason}") in analytics_shown(three).reasoning

    report = json.loads(proc.stdout)
    file_judge_scores_each_file_told_which(run_dir, tmp_path)
    (summary,) = report.values()
    protocol = {n["aspect"]: n for n in summary["protocol"]}
    assert protocol["several output files"]["source"] == "deskbench"
    assert protocol["structure strictness"]["source"] == "paper"  # the importer's decisions follow the reading


def file_judge_scores_each_file_told_which(run_dir: Path, tmp_path: Path) -> None:
    """With --file-judge (Listing 5: one prediction against one reference) each file of a
    several-file task gets its own judge run, whose question says which file it checks."""
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        wrong = "this check is about feb.csv only" in prompt
        return {"kind": "text", "text": json.dumps({"is_correct": not wrong, "reason": "checked by the judge"})}

    items_file = tmp_path / "judged.jsonl"
    with FakeOpenAI(script=script) as judge:
        proc = run_cli("score", str(run_dir), "--file-judge", f"openai-compat/files@{judge.base_url}",
                       "--items-out", str(items_file))
        assert proc.returncode == 0, proc.stderr
        questions = [next(m["content"] for m in b["messages"] if m["role"] == "user") for b in judge.requests]
    assert len(questions) == 5  # FG_1: 2 files, FG_2: 1, FG_3: 2
    assert sum("this task asks for several files (jan.csv, feb.csv)" in q for q in questions) == 2
    assert not any("several files" in q for q in questions if "totals.xlsx" in q)
    items = {i.task_id: i for i in (AnalyticsItemScore.model_validate_json(line)
                                    for line in items_file.read_text().splitlines())}
    three = items["FG_3"]
    assert three.score == 0.0 and [(o.output_name, o.score, o.source) for o in three.outputs] == [
        ("jan.csv", 1.0, "file_judge"), ("feb.csv", 0.0, "file_judge")]
    assert items["FG_1"].score == 1.0 and items["FG_1"].source == "file_judge"
    assert items["FG_2"].score == 1.0  # the judge, not the comparator, decided (as the paper's protocol has it)


def test_plain_number_references() -> None:
    assert plain_number("150") == (150.0, None) and plain_number(" 1,234.5 ") == (1234.5, None)
    assert plain_number("12.5%") == (12.5, "%") and plain_number("-3") == (-3.0, None)
    for text in ("North (150)", "150 and 90", "1,23", "about 150", ""):
        assert plain_number(text) is None, text


def test_references_pair_with_outputs_by_name_then_position() -> None:
    assert pair_references(["a.csv", "b.csv"], ["b_res.csv", "a_res.xlsx"]) == [("a.csv", "a_res.xlsx"),
                                                                              ("b.csv", "b_res.csv")]
    assert pair_references(["out.xlsx"], ["answer.xlsx"]) == [("out.xlsx", "answer.xlsx")]  # by position
    assert pair_references(["a.csv", "b.csv"], ["x.csv"]) is None
