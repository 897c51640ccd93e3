"""The bundled demo benchmark (deskbench.generate.demo): what `generate demo` makes, byte for
byte, with every track's part complete, and `--check` telling a tampered copy from a fresh build.
`deskbench demo` running on it: tests/cli/test_demo.py."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli

from deskbench.generate.demo import bundled_dir, checksums, recorded_sums
from deskbench.tracks.analytics import demo as analytics_demo
from deskbench.tracks.deliverables import demo as deliverables_demo
from deskbench.tracks.docqa import demo as docqa_demo
from deskbench.tracks.docqa.tasks import read_tasks


def test_bundle_is_complete_and_matches_its_sums() -> None:
    bundle = bundled_dir()
    tasks = read_tasks(bundle / "docqa" / "tasks.jsonl").items
    assert len(tasks) == docqa_demo.QUESTIONS
    assert len(list((bundle / "docqa" / "pdfs").glob("*.pdf"))) == docqa_demo.DOCS
    assert sum(t.injection is not None for t in tasks) == round(docqa_demo.INJECTIONS * docqa_demo.QUESTIONS)
    assert len((bundle / "analytics" / "tasks.jsonl").read_text().splitlines()) == analytics_demo.TASKS
    assert len([p for p in (bundle / "deliverables").iterdir() if p.is_dir()]) == deliverables_demo.TASKS
    assert checksums(bundle) == recorded_sums(bundle)


def test_a_fresh_build_is_byte_identical_to_the_bundle() -> None:
    proc = run_cli("generate", "demo", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "byte-identical" in proc.stdout


def test_check_reports_a_tampered_bundle(tmp_path: Path) -> None:
    copy = tmp_path / "demo"
    assert run_cli("generate", "demo", "--out", str(copy)).returncode == 0
    tasks = copy / "docqa" / "tasks.jsonl"
    tasks.write_text(tasks.read_text().replace('"', "'", 1))
    proc = run_cli("generate", "demo", "--check", "--out", str(copy))
    assert proc.returncode == 1
    assert "docqa/tasks.jsonl" in proc.stderr
