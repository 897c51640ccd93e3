"""`deskbench import-tasks aida`: an AIDA-shaped manifest (tests/data/aida, written in the field
layout the release's own runners read) becomes deskbench analytics tasks; what cannot be
converted is skipped with its reason."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli

from deskbench.tracks.analytics.aida import split_names
from deskbench.tracks.analytics.tasks import read_tasks

DATA = Path(__file__).parents[2] / "data" / "aida"


def test_aida_manifest_becomes_analytics_tasks(tmp_path: Path) -> None:
    out = tmp_path / "tasks" / "aida.jsonl"
    proc = run_cli("import-tasks", "aida", str(DATA / "AIDA_sample.jsonl"), "--output", str(out),
                   "--difficulty-steps", "7")
    assert proc.returncode == 0, proc.stderr
    tasks = {t.id: t for t in read_tasks(out).items}
    assert set(tasks) == {"QA_1", "FG_1", "DV_1"}
    qa = tasks["QA_1"]
    assert qa.category == "qa" and qa.answer == "150%" and qa.key_points == ["North sales total 150", "target 100"]
    assert [Path(p).name for p in qa.inputs] == ["sales.csv", "targets.csv"]
    assert all(p.is_file() for p in qa.input_paths(out.parent))  # relative to the tasks file's folder
    fg = tasks["FG_1"]
    assert fg.reference_file is not None and fg.reference_file.output_name == "totals.csv"
    assert (out.parent / fg.reference_file.path).is_file()
    assert [(s.columns, s.rows) for s in fg.reference_file.sheets] == [(["region", "total"], 2)]
    assert fg.params == {"eval_area": "A1:B3"} and fg.difficulty == "medium"
    # "Total sales by region into totals.csv." names no order, header or layout: relaxed, decided here
    assert fg.reference_file.strict_structure is False and "relaxed, decided at import" in fg.reference_file.structure_reason
    dv = tasks["DV_1"]  # the chart judges' inputs: question, key points, the image asked for; no chart spec
    assert dv.category == "visualization" and dv.chart is None and dv.chart_file == "chart.png"
    assert dv.key_points == ["bars for North and South"]
    for task_id, reason in (("QA_2", "no reference answer"), ("FG_2", "reference file missing")):
        line = next(x for x in proc.stderr.splitlines() if task_id in x)
        assert reason in line


def test_aida_without_step_counts_or_with_an_unknown_format_is_refused(tmp_path: Path) -> None:
    proc = run_cli("import-tasks", "aida", str(DATA / "AIDA_sample.jsonl"), "--output", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2 and "AIDA_sample.jsonl:1" in proc.stderr and "--difficulty-steps" in proc.stderr
    assert not (tmp_path / "t.jsonl").exists()
    proc = run_cli("import-tasks", "spreadsheetbench", str(DATA / "AIDA_sample.jsonl"), "--output", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2 and "choose one of: aida" in proc.stderr


def test_packed_file_names() -> None:
    assert split_names("a.xlsx\nb.xlsx;c.csv\r\n") == ["a.xlsx", "b.xlsx", "c.csv"]
    assert split_names(["a.xlsx", " "]) == ["a.xlsx"] and split_names(None) == []
