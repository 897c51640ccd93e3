"""`deskbench fetch aida`, offline: a snapshot written here in the release's layout (split folders,
each with its manifest and input/<id>/, reference/<id>/ beside it; a dataset card without
`configs:`, as the published one has), read with --from or served by a strict local double of
the hub (tests/hf_hub_double.py), each manifest imported into its own tasks file.

The layout and field names are those tracks/analytics/aida.py documents (no official code is
reachable: the manifests' fields as third-party runners of the release read them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from hf_hub_double import GRANTED, SHA, FakeHub, hub_env

from deskbench.errors import UserError
from deskbench.tracks.analytics.fetch import (
    AidaFetchOptions,
    fetch_aida,
    find_manifests,
    hub_patterns,
)
from deskbench.tracks.analytics.tasks import read_tasks

REPO = "MichaelYang-lyx/AIDA"
CARD = """---
language:
- zh
license: apache-2.0
pretty_name: AIDABench
---
# Dataset Card for AIDABench
"""
SALES = "region,amount\nNorth,100\nSouth,50\nNorth,50\n"
ROWS: dict[str, list[dict[str, Any]]] = {
    "QA_en": [
        {"id": "QA_1", "question": "North's sales as a share of its target?", "input_file": "sales.csv\ntargets.csv",
         "reference": "150%", "rubrics": ["North sales total 150", "target 100"]},
        {"id": "QA_2", "question": "Which region sold most?", "input_file": "sales.csv", "reference": None},
        {"id": "QA_3", "question": "Total sales?", "input_file": "sales.csv", "reference": 200},
    ],
    "QA_zh": [
        {"id": "QA_1", "question": "北区销售额占目标的比例?", "input_file": "sales.csv\ntargets.csv", "reference": "150%"},
    ],
    "data_visualization_en": [
        {"id": "DV_1", "question": "Bar chart of sales by region into chart.png.", "input_file": "sales.csv",
         "output_file": "chart.png", "rubrics": ["one bar per region", "North is 150"]},
    ],
    "file_generation_en": [
        {"id": "FG_1", "question": "Total sales by region into totals.csv.", "input_file": "sales.csv",
         "output_file": "totals.csv", "reference_file": "totals_res.csv", "eval_area": "A1:B3"},
        {"id": "FG_2", "question": "Totals into a.csv.", "input_file": "missing.csv", "output_file": "a.csv",
         "reference_file": "a_res.csv"},
    ],
}
REFERENCES = {"FG_1": {"totals_res.csv": "region,total\nNorth,150\nSouth,50\n"}, "FG_2": {"a_res.csv": "x\n1\n"}}


def write_release(root: Path) -> Path:
    """The release as `hf download` leaves it: the card, a figure, split folders, and a JSON Lines
    file that is no manifest (it must be left alone)."""
    (root / "images").mkdir(parents=True)
    (root / "README.md").write_text(CARD, encoding="utf-8")
    (root / "images" / "figure1_overview.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "meta").mkdir()
    (root / "meta" / "annotators.jsonl").write_text('{"name": "a", "tasks": 3}\n', encoding="utf-8")
    for split, rows in ROWS.items():
        folder = root / split
        folder.mkdir()
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                               encoding="utf-8")
        for row in rows:
            for name in row["input_file"].split("\n"):
                if name != "missing.csv":
                    (folder / "input" / row["id"]).mkdir(parents=True, exist_ok=True)
                    (folder / "input" / row["id"] / name).write_text(SALES, encoding="utf-8")
            for name, text in REFERENCES.get(row["id"], {}).items():
                (folder / "reference" / row["id"]).mkdir(parents=True, exist_ok=True)
                (folder / "reference" / row["id"] / name).write_text(text, encoding="utf-8")
    return root


def test_a_snapshot_becomes_one_tasks_file_per_manifest(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release")
    out = tmp_path / "aida"
    summary = fetch_aida(AidaFetchOptions(out=out, source=release, difficulty_steps=7))
    assert [m.split for m in summary.imports] == ["QA_en", "QA_zh", "data_visualization_en",
                                                  "file_generation_en"]  # meta/ left alone
    by_split = {m.split: m for m in summary.imports}
    qa = by_split["QA_en"]
    assert qa.manifest == "QA_en/QA_en.jsonl" and qa.tasks == 2 and qa.by_category == {"qa": 2}
    assert qa.skipped == {"qa: no reference answer": ["QA_2"]}
    tasks = {t.id: t for t in read_tasks(Path(qa.tasks_file)).items}
    assert tasks["QA_1"].answer == "150%" and tasks["QA_3"].answer == "200"
    assert all(p.read_text() == SALES for p in tasks["QA_1"].input_paths(out / "tasks"))  # paths from tasks/
    zh = read_tasks(out / "tasks" / "QA_zh.jsonl").items  # the same id as in English: its own file
    assert [t.id for t in zh] == ["QA_1"] and zh[0].instruction.startswith("北区")
    fg = by_split["file_generation_en"]
    assert fg.tasks + sum(len(ids) for ids in fg.skipped.values()) == 2
    assert "FG_2" in fg.skipped.get("input file missing", [])
    fg_tasks = read_tasks(Path(fg.tasks_file)).items
    assert [t.id for t in fg_tasks] == ["FG_1"] and fg_tasks[0].params == {"eval_area": "A1:B3"}
    dv = by_split["data_visualization_en"]
    assert (dv.tasks, dv.by_category, dv.skipped) == (1, {"visualization": 1}, {})  # scored by the chart judges
    chart = read_tasks(Path(dv.tasks_file)).items[0]
    assert chart.key_points == ["one bar per region", "North is 150"] and chart.chart is None
    written = json.loads((out / "fetch.json").read_text())
    assert written["source"] == str(release) and written["revision"] is None and len(written["imports"]) == 4


def test_split_chooses_manifests_and_an_unknown_one_names_those_there(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release")
    assert [p.relative_to(release).as_posix() for p in find_manifests(release, ("QA_zh",))] == ["QA_zh/QA_zh.jsonl"]
    proc = run_cli("fetch", "aida", "--from", str(release), "--out", str(tmp_path / "a"), "--split", "QA_fr",
                   "--difficulty-steps", "3")
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == (f"error: --split 'QA_fr': {release} has no AIDA manifest of that name (it has: "
                                   "QA_en, QA_zh, data_visualization_en, file_generation_en)")
    proc = run_cli("fetch", "aida", "--from", str(release), "--out", str(tmp_path / "b"), "--split", "QA_zh",
                   "--difficulty-steps", "3")
    assert proc.returncode == 0, proc.stderr
    assert "QA_zh: 1 tasks (1 qa)" in proc.stdout and "deskbench analyse task-stats" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "b" / "tasks").iterdir()) == ["QA_zh.jsonl"]


@pytest.mark.parametrize(("setup", "args", "expected"), [
    ("empty", ("--difficulty-steps", "3"), "holds no AIDA manifest"),
    ("file", ("--difficulty-steps", "3"), "is a file; give the snapshot folder"),
    ("release", (), "--difficulty-steps"),  # the release has no step counts: said, nothing guessed
    ("release", ("--difficulty-steps", "0"), "--difficulty-steps 0 is not valid"),
    ("release", ("--split", "../x", "--difficulty-steps", "3"), "is not a split name"),
])
def test_what_cannot_be_fetched_is_one_line(tmp_path: Path, setup: str, args: tuple[str, ...], expected: str) -> None:
    source = write_release(tmp_path / "release") if setup == "release" else tmp_path / setup
    if setup == "file":
        source.write_text("{}")
    else:
        source.mkdir(exist_ok=True)
    proc = run_cli("fetch", "aida", "--from", str(source), "--out", str(tmp_path / "a"), *args)
    assert proc.returncode == 2, proc
    assert expected in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_missing_snapshot_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        fetch_aida(AidaFetchOptions(out=tmp_path / "out", source=tmp_path / "no-such-snapshot"))


def test_hub_patterns_ask_for_the_chosen_splits_only() -> None:
    import fnmatch

    def wanted(name: str, splits: tuple[str, ...]) -> bool:
        return any(fnmatch.fnmatch(name, p) for p in hub_patterns(splits))

    assert wanted("QA_en/input/QA_1/sales.csv", ()) and wanted("images/a.png", ())
    assert wanted("QA_en/QA_en.jsonl", ("QA_en",)) and wanted("data/QA_en/input/QA_1/s.csv", ("QA_en",))
    assert wanted("README.md", ("QA_en",))
    assert not wanted("QA_zh/QA_zh.jsonl", ("QA_en",)) and not wanted("images/a.png", ("QA_en",))


def _command(out: Path) -> list[str]:
    return [sys.executable, "-m", "deskbench.cli", "fetch", "aida", "--out", str(out), "--difficulty-steps", "7",
            "--json"]


def test_from_the_hub_a_killed_fetch_is_completed_by_the_next_run(tmp_path: Path) -> None:
    release = write_release(tmp_path / "repo")
    out = tmp_path / "aida"
    files = sorted(p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file())
    with FakeHub(release, REPO) as hub:
        env = hub_env(tmp_path, hub, None)  # a public dataset: no token needed
        hub.hold = "file_generation_en/reference/FG_1/totals_res.csv"
        killed = subprocess.Popen(_command(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert hub.reached.wait(120), "the fetch never reached the held file"
        finally:
            killed.kill()  # SIGKILL halfway through a file
            killed.wait(60)
        before = hub.file_gets()
        assert before and hub.hold not in before and not list((out / "tasks").glob("*.jsonl"))  # none imported yet

        hub.hold = None
        hub.release.set()
        done = subprocess.run(_command(out), env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done
        summary = json.loads(done.stdout)
        assert summary["revision"] == SHA and summary["source"] == f"{hub.url}/datasets/{REPO}"
        assert summary["snapshot"] == str(out / "snapshot")
        assert [(m["split"], m["tasks"]) for m in summary["imports"]] == [
            ("QA_en", 2), ("QA_zh", 1), ("data_visualization_en", 1), ("file_generation_en", 1)]
        second = hub.file_gets()[len(before):]
        assert sorted(before + second) == files  # every file whole once: what the killed run got was kept
        assert all(r[2] is None for r in hub.log)  # no token: none sent

        again = subprocess.run(_command(out), env=hub_env(tmp_path, hub, GRANTED), capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0, again
        assert hub.file_gets() == before + second  # nothing downloaded again
        assert any(r[2] == f"Bearer {GRANTED}" for r in hub.log)  # a token is sent when there is one
        tasks = read_tasks(out / "tasks" / "file_generation_en.jsonl").items
        assert tasks[0].reference_file is not None
        assert (out / "tasks" / tasks[0].reference_file.path).read_text() == REFERENCES["FG_1"]["totals_res.csv"]
