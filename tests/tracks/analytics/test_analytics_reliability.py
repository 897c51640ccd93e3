"""analytics' pass^k and consistency of answers (scoring/analytics_metrics.py over
scoring/attempts.py): a chart succeeds when its correctness C is 1 (not when S is), a qa task's
answer is its final value; the figures computed by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.analytics.outcomes import analytics_outcomes
from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore, qa_answer_key
from deskbench.tracks.analytics.scoring.analytics_metrics import pass_metrics
from deskbench.tracks.analytics.scoring.analytics_qa import QAVerdict
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask


def qa(task: str, attempt: int, score: float, answer: str) -> AnalyticsItemScore:
    return AnalyticsItemScore.model_validate({
        "task_id": task, "attempt": attempt, "system": "s", "category": "qa", "difficulty": "easy",
        "status": "scored", "score": score, "source": "numeric", "answer": answer})


def chart(task: str, attempt: int, c: float, r: float) -> AnalyticsItemScore:
    return AnalyticsItemScore.model_validate({
        "task_id": task, "attempt": attempt, "system": "s", "category": "visualization", "difficulty": "easy",
        "status": "scored", "score": 0.7 * c + 0.3 * r, "source": "chart_judge", "correctness": c, "readability": r})


def test_pass_hat_counts_a_chart_with_full_correctness_and_qa_values_agree() -> None:
    # qa a: right, right, wrong ("12.5", "12.5", "3"): 2 of 3, values differ
    # qa b: right every time ("7" each): 3 of 3, values agree
    # chart c: C = 1 with R = 0.5 every time (S = 0.85 < 1, yet correct): 3 of 3; no answer to compare
    items = ([qa("a", i, s, x) for i, (s, x) in enumerate([(1.0, "12.5"), (1.0, "12.5"), (0.0, "3")])]
             + [qa("b", i, 1.0, "7") for i in range(3)] + [chart("c", i, 1.0, 0.5) for i in range(3)])
    r = pass_metrics(items, k=3).reliability
    assert r is not None
    # pass^3: a 0, b 1, c 1 -> 2/3; pass^2: a C(2,2)/C(3,2) = 1/3, b 1, c 1 -> 7/9; pass^1: (2/3 + 1 + 1) / 3 = 8/9
    assert r.curve == [pytest.approx(8 / 9), pytest.approx(7 / 9), pytest.approx(2 / 3)]
    assert r.solved == [0, 0, 1, 2]
    assert (r.consistency, r.n_consistency) == (0.5, 2)  # a and b have values; the chart is left out
    assert [o.answer for o in analytics_outcomes(items[:2])] == ["12.5", "12.5"]


def test_qa_answer_key_is_the_final_value_else_the_conclusion() -> None:
    def verdict(values: list[float], conclusion: str) -> QAVerdict:
        return QAVerdict(status="scored", score=1, source="numeric", reason="", deterministic="pass",
                         conclusion=conclusion, answer_values=values)

    assert qa_answer_key(verdict([3.0, 12.5], "from 3 to 12.50")) == qa_answer_key(verdict([12.5], "12.5")) == "12.5"
    assert qa_answer_key(verdict([], "  The  North region ")) == "the north region"


def _run(run_dir: Path) -> Path:
    """Two QA tasks decided by the numeric check, two attempts each: a right twice (12.5, 12.50),
    b right then wrong (12.5, 3)."""
    store = RunStore(run_dir)
    store.save_tasks([AnalyticsTask(id=t, category="qa", instruction="Total?", inputs=["x.xlsx"], difficulty_steps=3,
                                    answer="12.5", answer_value=12.5) for t in "ab"])
    store.set_meta("tasks_file", str(run_dir / "tasks.jsonl"))
    for task, answers in {"a": ["12.5", "12.50"], "b": ["12.5", "3"]}.items():
        for attempt, answer in enumerate(answers):
            store.record(Episode(task_id=task, system="analyst-agent:m", attempt=attempt, status="ok",
                                 submission=AnalyticsSubmission(id=task, answer=f"Final answer: {answer}", rounds=1)))
    store.close()
    return run_dir


def test_score_and_report_show_pass_hat(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    proc = run_cli("score", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)["analyst-agent:m"]["overall"]["reliability"]
    # pass^2: a 1, b 0 -> 1/2; a's final values agree (12.5 both), b's do not
    assert (r["pass_hat"], r["solved"], r["consistency"]) == (0.5, [0, 1, 1], 0.5)
    text = run_cli("score", str(run))
    assert "reliability (k=2): pass^2 50.0 over 2 tasks" in " ".join(text.stdout.split())
    page = tmp_path / "report.html"
    assert run_cli("report", str(run), "--output", str(page)).returncode == 0
    row = page.read_text().split('id="analytics-leaderboard"')[1].split("</tr>", 2)[2]
    # overall pass@1 100, pass@2 100, avg@2 75, pass^2 50
    cells = [c.split("<")[0] for c in row.split("<td>")[3:]]  # after the system and k
    assert cells[0].startswith("100.0") and cells[4] == "100.0" and "75.0" in cells and cells[9] == "50.0"
