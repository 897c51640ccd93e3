"""analyst-agent end to end: the real bubblewrap sandbox, a scripted model on the wire (the model
is not what these tests check: the loop, the sandbox, the files and the scores are), and the
real local SmolLM2 for the whole pipeline."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.runs.store import RunStore
from deskbench.tracks.analytics.generate.tasks import generate_analytics
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask, read_tasks


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=11, seed=5)
    return out


def _tasks(tasks_dir: Path) -> dict[str, AnalyticsTask]:
    return {t.template: t for t in read_tasks(tasks_dir / "tasks.jsonl").items}


def tool(code: str) -> dict[str, Any]:
    return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code})}


def text(value: str) -> dict[str, Any]:
    return {"kind": "text", "text": value}


def write_subset(tasks_dir: Path, tasks: list[AnalyticsTask], name: str) -> Path:
    path = tasks_dir / name
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8")
    return path


def run(tasks_file: Path, out: Path, fake: FakeOpenAI, *extra: str) -> Any:
    proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(tasks_file), "--out", str(out),
                   "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1", "--quiet",
                   "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()  # {system: report}, one system
    return report


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_qa_file_and_chart_episodes_end_to_end(bwrap: str, tasks_dir: Path, tmp_path: Path) -> None:
    by_template = _tasks(tasks_dir)
    qa, file_task, chart = (by_template["qa_quarter_total"], by_template["file_region_summary"],
                            by_template["viz_city_bar_cjk"])
    assert file_task.reference_file is not None and chart.chart is not None
    reference = (tasks_dir / file_task.reference_file.path).read_bytes()
    inputs = {t.id: Path(t.inputs[0]).name for t in (qa, file_task, chart)}
    labels = chart.chart.series[0].labels
    values = chart.chart.series[0].values

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        prompt = body["messages"][0]["content"]
        done = len(tool_messages(body))
        if qa.instruction in prompt:
            if done == 0:  # look at the file (openpyxl in the sandbox), then answer
                return tool(f"import openpyxl\nwb = openpyxl.load_workbook('/mnt/data/{inputs[qa.id]}')\n"
                            "print('sheets:', wb.sheetnames)")
            return text(f"Final answer: {qa.answer}")
        if file_task.instruction in prompt:
            if done == 0:
                blob = base64.b64encode(reference).decode()
                return tool("import base64\nopen('/mnt/result/" + file_task.reference_file.output_name
                            + f"', 'wb').write(base64.b64decode('{blob}'))\nprint('saved')")
            return text("The workbook is saved.")
        if done == 0:  # the chart, drawn in matplotlib's default font: no CJK glyphs
            return tool("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                        f"plt.bar({labels!r}, {values!r})\nplt.title('sales')\n"
                        "plt.savefig('/mnt/result/chart.png')\n")
        return text("Chart saved as chart.png")

    tasks_file = write_subset(tasks_dir, [qa, file_task, chart], "three.jsonl")
    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        report = run(tasks_file, out, fake)
        first_qa = next(b for b in fake.requests if qa.instruction in b["messages"][0]["content"]
                        and tool_messages(b))
    # the model read the sandbox's output, and the prompt carried the summary and file list
    assert "sheets:" in tool_messages(first_qa)[0]
    assert f"/mnt/data/{inputs[qa.id]}" in first_qa["messages"][0]["content"]
    assert "Auxiliary spreadsheet summary" in first_qa["messages"][0]["content"]

    store = RunStore(out, create=False)
    episodes = {ep.task_id: ep for ep in store.episodes()}
    assert {ep.status for ep in episodes.values()} == {"ok"}
    sub = episodes[file_task.id].submission
    assert isinstance(sub, AnalyticsSubmission) and sub.rounds == 1 and sub.stop == "answer"
    (produced,) = sub.files
    assert produced.name == file_task.reference_file.output_name and produced.size == len(reference)
    assert (out / sub.files_dir / produced.name).read_bytes() == reference
    chart_sub = episodes[chart.id].submission
    assert isinstance(chart_sub, AnalyticsSubmission)
    assert any("missing from font" in w for w in chart_sub.file_warnings["chart.png"])
    steps = [s for s in episodes[qa.id].trajectory if s.kind == "tool_call"]
    assert steps[0].result["exit_code"] == 0 and "openpyxl" in steps[0].arguments["code"]

    # scores: the QA answer and the file pass; the chart has no judge (unscored) but its
    # missing glyphs are caught deterministically
    assert report["by_category"]["qa"]["pass1"] == 1.0
    assert report["by_category"]["file_generation"]["pass1"] == 1.0
    assert report["n_unscored"] == 1 and report["glyph_failures"] == 1
    assert report["sources"]["comparator"] == 1


def test_round_limit_statelessness_and_attempts(bwrap: str, tasks_dir: Path, tmp_path: Path) -> None:
    qa = _tasks(tasks_dir)["qa_target_ratio"]
    state_probe = ("import os\nprint('tmp file survived' if os.path.exists('/tmp/x') else 'fresh tmp')\n"
                   "print('result dir', sorted(os.listdir('/mnt/result')))\n"
                   "open('/tmp/x', 'w').write('1'); open('/mnt/result/note.txt', 'w').write('hi')")

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        return tool(state_probe)  # never answers

    tasks_file = write_subset(tasks_dir, [qa], "one.jsonl")
    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        report = run(tasks_file, out, fake, "--max-rounds", "3", "--attempts", "2", "--no-summary")
        last = fake.requests[3]
    outputs = tool_messages(last)
    assert len(outputs) == 3
    assert all("fresh tmp" in o and "result dir []" in o for o in outputs)  # no state between calls
    assert "round limit" not in outputs[-1]  # the paper's model is not warned (--last-round-note warns it)
    assert "Auxiliary spreadsheet summary" not in last["messages"][0]["content"]
    store = RunStore(out, create=False)
    eps = store.episodes()
    assert sorted(ep.attempt for ep in eps) == [0, 1] and {ep.status for ep in eps} == {"limit"}
    assert all(ep.system == "analyst-agent[no-summary]:openai-compat/scripted" for ep in eps)
    sub = eps[0].submission
    assert isinstance(sub, AnalyticsSubmission) and sub.stop == "round_limit" and sub.rounds == 3
    assert [f.name for f in sub.files] == ["note.txt"]
    assert report["overall"]["pass1"] == 0.0 and report["k"] == 2
    assert report["errors"]["qa"]["round_limit"] == 2
    # resuming runs nothing again
    with FakeOpenAI(script=script) as fake:
        run(tasks_file, out, fake, "--max-rounds", "3", "--attempts", "2", "--no-summary")
        assert fake.requests == []


def test_local_model_pipeline(bwrap: str, local_model: str, tasks_dir: Path, tmp_path: Path) -> None:
    """SmolLM2-135M will not solve the task: the episode must still be run, stored and scored."""
    qa = _tasks(tasks_dir)["qa_quarter_total"]
    tasks_file = write_subset(tasks_dir, [qa], "local.jsonl")
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "analyst-agent", "--model", "local", "--tasks", str(tasks_file),
                   "--out", str(out), "--max-rounds", "2", "--max-tokens", "256", "--quiet", "--json",
                   timeout=600)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()  # {system: report}
    (ep,) = RunStore(out, create=False).episodes()
    assert ep.status in ("ok", "limit", "error")
    assert ep.usage.calls >= 1 and any(s.kind == "model_call" for s in ep.trajectory)
    assert report["n_episodes"] == 1


def test_missing_input_file_is_refused_before_any_work(tasks_dir: Path, tmp_path: Path) -> None:
    task = _tasks(tasks_dir)["qa_quarter_total"].model_copy(update={"inputs": ["inputs/none/missing.xlsx"]})
    tasks_file = write_subset(tasks_dir, [task], "missing.jsonl")
    proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(tasks_file), "--out", str(tmp_path / "run"),
                   "--model", "openai-compat/x@http://127.0.0.1:9/v1", "--quiet")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "missing.xlsx" in proc.stderr
    assert not (tmp_path / "run").exists()
