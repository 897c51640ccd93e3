"""`deskbench demo`, the README's main job: the demo ingests the bundled benchmark, runs the
no-model baseline and the local model agent, stores every episode and prints the leaderboard; a
second run resumes. (The bundle itself: tests/generate/test_demo_bundle.py, a file of its own so
that xdist runs its builds on the other worker while this one runs the model.)"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from conftest import require_tool, run_cli

from deskbench.tracks.docqa import demo as docqa_demo


def test_demo_runs_both_systems_and_resumes(local_model: str, tmp_path: Path) -> None:
    require_tool("tesseract")
    out = tmp_path / "demo"
    args = ("demo", "--out", str(out), "--local-limit", "2", "--max-steps", "1", "--analytics-limit", "1", "--quiet")
    proc = run_cli(*args, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "docqa leaderboard" in proc.stdout
    # the scans were OCR'd (words compared with the console's line breaks as spaces)
    assert re.search(r"\(\d+ new pages, [1-9]\d* read by OCR\)", " ".join(proc.stdout.split())), proc.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<table id="leaderboard">' in html and html.count('data:image/png;base64,') >= 5
    assert '<table id="analytics-leaderboard">' in html and "analytics score" in proc.stdout
    assert 'id="deliverables-leaderboard"' in html
    deliverables_dir = next(p for p in (out / "runs").iterdir() if p.name.startswith("deliverable-agent"))
    db = sqlite3.connect(deliverables_dir / "run.sqlite")
    assert db.execute("SELECT count(*) FROM episodes").fetchone() == (1,)
    graded = db.execute("SELECT count(*) FROM rubric_grades").fetchone()[0]
    failed = db.execute("SELECT count(*) FROM rubric_failures").fetchone()[0]
    episode_ok = db.execute("SELECT status = 'ok' FROM episodes").fetchone()[0]
    assert graded + failed == episode_ok  # an ok deliverable is graded by the model, or recorded as not
    analytics_dir = next(p for p in (out / "runs").iterdir() if p.name.startswith("analyst-agent"))
    (status,) = sqlite3.connect(analytics_dir / "run.sqlite").execute("SELECT status FROM episodes").fetchone()
    assert status in ("ok", "error", "limit")
    lexical = sqlite3.connect(out / "runs" / "lexical" / "run.sqlite")
    assert lexical.execute("SELECT count(*), sum(status = 'ok') FROM episodes").fetchone() == (docqa_demo.QUESTIONS,) * 2
    agent_dir = next(p for p in (out / "runs").iterdir() if p.name.startswith("bm25-agent"))
    rows = sqlite3.connect(agent_dir / "run.sqlite").execute("SELECT status, trajectory FROM episodes").fetchall()
    assert len(rows) == 2
    for status, trajectory in rows:
        assert status in ("ok", "error", "limit")
        assert any(step["kind"] == "model_call" for step in json.loads(trajectory))
    again = run_cli(*args, timeout=900)
    assert again.returncode == 0, again.stderr
    assert "(0 new pages, 0 read by OCR)" in " ".join(again.stdout.split())  # the corpus is reused, not ingested again
    assert f"0 episodes run (0 errors), {docqa_demo.QUESTIONS} already done" in again.stderr
    assert "0 episodes run (0 errors), 2 already done" in again.stderr
    assert again.stderr.count("0 episodes run (0 errors), 1 already done") == 2  # analytics, deliverables


def test_generate_commands_refuse_bad_counts(tmp_path: Path) -> None:
    for args, flag in ((("docqa", "--num-docs", "3"), "docs=3 is too small"), (("docqa", "--injections", "1.5"), "--injections"),
                       (("analytics", "--num-tasks", "0"), "--num-tasks 0"), (("deliverables", "--num-tasks", "-1"), "--num-tasks -1")):
        proc = run_cli("generate", *args, "-o", str(tmp_path / "g"))
        assert proc.returncode == 2 and flag in proc.stderr and "Traceback" not in proc.stderr
    for args in (("--local-limit", "0"), ("--max-steps", "0"), ("--analytics-limit", "0")):
        proc = run_cli("demo", "--out", str(tmp_path / "d"), *args)
        assert proc.returncode == 2 and args[0] in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "d").exists()  # refused before any work
