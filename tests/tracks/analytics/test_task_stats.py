"""`deskbench analyse task-stats`: AIDABench's §3.1.2 statistics over a constructed task set whose
shares are counted by hand here; the command joins the core's `analyse` group beside docqa's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_cli

from deskbench.tracks.analytics.stats import task_stats
from deskbench.tracks.analytics.tasks import (
    AnalyticsTask,
    Category,
    ReferenceFile,
    SheetSpec,
    write_tasks,
)

CHART = {"chart_type": "bar", "series": [{"name": "s", "labels": ["a"], "values": [1.0]}]}


def _task(i: int, category: Category, inputs: list[str], steps: int) -> AnalyticsTask:
    extra: dict[str, Any] = {
        "qa": {"answer": "1"},
        "visualization": {"key_points": ["bars"], "chart": CHART},
        "file_generation": {"reference_file": ReferenceFile(path="r.csv", output_name="o.csv",
                                                            sheets=[SheetSpec(name="o", columns=["a"], rows=1)])},
    }[category]
    return AnalyticsTask(id=f"t{i}", category=category, instruction="do it", inputs=inputs, difficulty_steps=steps,
                         **extra)


# 8 tasks: 4 qa, 1 visualization, 3 file_generation; inputs 1,1,2,3,1,2,1,5 -> 16 files;
# steps 3,6,7,12,13,20,9,1 -> easy 3 (3, 6, 1), medium 3 (7, 12, 9), hard 2 (13, 20)
TASKS = [
    _task(0, "qa", ["a.xlsx"], 3),
    _task(1, "qa", ["b.csv"], 6),
    _task(2, "qa", ["c.xlsx", "d.docx"], 7),
    _task(3, "qa", ["e.XLSX", "f.pdf", "g.csv"], 12),
    _task(4, "visualization", ["h.xlsx"], 13),
    _task(5, "file_generation", ["i.xlsx", "j.xls"], 20),
    _task(6, "file_generation", ["k.csv"], 9),
    _task(7, "file_generation", ["l1.xlsx", "l2.xlsx", "l3.xlsx", "l4.xlsx", "README"], 1),
]


def test_shares_counted_by_hand() -> None:
    s = task_stats(TASKS)
    assert s.tasks == 8 and s.input_files == 16 and s.max_files == 5
    assert {c: (x.count, x.share) for c, x in s.categories.items()} == {
        "qa": (4, 0.5), "visualization": (1, 0.125), "file_generation": (3, 0.375)}
    assert s.categories["qa"].paper == 37.5 and s.categories["file_generation"].paper == 43.3
    # xlsx: a, c, e (upper-case extension), h, i, l1-l4 = 9; csv: b, g, k; xls: j -> tabular 13 of 16
    assert (s.tabular.count, s.tabular.share, s.tabular.paper) == (13, 13 / 16, 91.8)
    assert {e: x.count for e, x in s.formats.items()} == {"xlsx": 9, "csv": 3, "(none)": 1, "docx": 1, "pdf": 1,
                                                          "xls": 1}
    assert list(s.formats)[:2] == ["xlsx", "csv"]  # most frequent first
    assert (s.cross_file.count, s.two_files.count, s.three_or_more_files.count) == (4, 2, 2)
    assert s.cross_file.share == 0.5 and s.cross_file.paper == 27.4
    assert {d: x.count for d, x in s.difficulty.items()} == {"easy": 3, "medium": 3, "hard": 2}
    assert not s.difficulty_uniform


def test_one_step_count_for_all_is_said_and_an_empty_set_has_no_shares() -> None:
    same = task_stats([t.model_copy(update={"difficulty_steps": 7}) for t in TASKS])
    assert same.difficulty_uniform and same.difficulty["medium"].share == 1.0
    empty = task_stats([])
    assert empty.tasks == 0 and empty.categories["qa"].share is None and empty.max_files == 0


def test_the_command_counts_several_files_together_and_writes_json_and_a_plot(tmp_path: Path) -> None:
    write_tasks(tmp_path / "a.jsonl", TASKS[:4])
    write_tasks(tmp_path / "b.jsonl", TASKS[4:])
    out, png = tmp_path / "r" / "stats.json", tmp_path / "r" / "stats.png"
    proc = run_cli("analyse", "task-stats", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--output", str(out),
                   "--plot", str(png), "--json")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed == json.loads(out.read_text())
    assert printed["tasks"] == 8 and printed["categories"]["qa"]["share"] == 0.5
    assert printed["files"] == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert png.read_bytes().startswith(b"\x89PNG")
    table = run_cli("analyse", "task-stats", str(tmp_path / "a.jsonl"))
    assert table.returncode == 0, table.stderr
    assert "AIDABench §3.1.2" in table.stdout and "37.5%" in table.stdout and "100.0% (4)" in table.stdout


def test_a_missing_file_is_one_line_and_analyse_holds_every_track_s_analyses(tmp_path: Path) -> None:
    proc = run_cli("analyse", "task-stats", str(tmp_path / "nope.jsonl"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    listed = run_cli("analyse", "--help")
    assert listed.returncode == 0
    assert "task-stats" in listed.stdout and "agreement" in listed.stdout  # analytics' and docqa's in one group
