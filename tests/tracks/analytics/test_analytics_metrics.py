"""pass@1, pass@k, avg@k, groupings and bad-case counts, on hand-made scores; the run store
keeping analytics and docqa submissions apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.outputs import OutputFileRecord
from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
from deskbench.tracks.analytics.scoring.analytics_metrics import pass_metrics, summarize_analytics
from deskbench.tracks.analytics.tasks import AnalyticsSubmission, AnalyticsTask
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


def item(task: str, attempt: int, score: float | None, category: str = "qa", difficulty: str = "easy",
         error: str | None = None, tokens: int = 100, rounds: int = 2) -> AnalyticsItemScore:
    return AnalyticsItemScore(
        task_id=task, attempt=attempt, system="s", category=category, difficulty=difficulty,  # type: ignore[arg-type]
        status="scored" if score is not None else "unscored", score=score, source="numeric",
        error_category=error if score is not None and score < 1 else None,  # type: ignore[arg-type]
        tokens=tokens, rounds=rounds)


def test_pass_at_k_by_hand() -> None:
    # task a: 0, 1, 0 -> first 0, best 1, mean 1/3
    # task b: 1, 1, 1 -> first 1, best 1, mean 1
    # task c (chart, soft): 0.4, 0.9, 0.5 -> first 0.4, best 0.9, mean 0.6
    items = [item("a", 0, 0.0), item("a", 1, 1.0), item("a", 2, 0.0),
             item("b", 0, 1.0), item("b", 1, 1.0), item("b", 2, 1.0),
             item("c", 0, 0.4), item("c", 1, 0.9), item("c", 2, 0.5)]
    m = pass_metrics(items, k=3)
    assert m.pass1 == pytest.approx((0 + 1 + 0.4) / 3)
    assert m.passk == pytest.approx((1 + 1 + 0.9) / 3)
    assert m.avgk == pytest.approx((1 / 3 + 1 + 0.6) / 3)
    assert m.complete and m.n_tasks == 3
    assert m.mean_tokens == 100 and m.mean_rounds == 2


def test_unscored_attempts_are_left_out_and_mark_pass_k_incomplete() -> None:
    items = [item("a", 0, None), item("a", 1, 1.0), item("a", 2, 0.0), item("b", 0, None)]
    m = pass_metrics(items, k=3)
    assert m.pass1 is None  # no task has a scored first attempt
    assert m.passk == 1.0 and m.avgk == 0.5 and m.n_tasks == 1
    assert not m.complete


def test_report_groups_errors_and_missing() -> None:
    items = [
        item("q1", 0, 0.0, "qa", "easy", "calculation"), item("q2", 0, 1.0, "qa", "hard"),
        item("v1", 0, 0.55, "visualization", "medium", "garbled_text"),
        item("f1", 0, 0.0, "file_generation", "hard", "semantic"),
        item("f2", 0, 0.0, "file_generation", "medium", "round_limit"),
    ]
    r = summarize_analytics(items, system="s", k=1, task_ids=["q1", "q2", "v1", "f1", "f2", "f3"])
    assert r.missing == ["f3#0"]
    assert r.overall.pass1 == pytest.approx((0 + 1 + 0.55 + 0 + 0) / 5)
    assert r.by_category["qa"].pass1 == 0.5
    assert r.by_difficulty["hard"].pass1 == 0.5
    assert r.errors["qa"]["calculation"] == 1 and r.errors["qa"]["semantic"] == 0
    assert r.errors["visualization"]["garbled_text"] == 1
    assert r.errors["file_generation"] == {"calculation": 0, "semantic": 1, "round_limit": 1,
                                           "garbled_text": 0, "other": 0}


def test_overall_weighs_categories_by_task_count_as_table_1() -> None:
    """AIDABench Table 1, claude-sonnet-4-5 pass@3: QA 72.12 (163/226), File Gen. 66.28 (173/261),
    Data Vis. 78.28 over 116 soft-scored tasks -> Overall 70.78."""
    items = [item(f"q{i}", 0, 1.0 if i < 163 else 0.0, "qa") for i in range(226)]
    items += [item(f"f{i}", 0, 1.0 if i < 173 else 0.0, "file_generation") for i in range(261)]
    items += [item(f"v{i}", 0, 0.7828, "visualization") for i in range(116)]
    r = summarize_analytics(items, system="s", k=1, task_ids=[it.task_id for it in items])
    assert round(100 * r.by_category["qa"].passk, 2) == 72.12
    assert round(100 * r.by_category["file_generation"].passk, 2) == 66.28
    assert round(100 * r.overall.passk, 2) == 70.78


def test_store_keeps_analytics_and_docqa_submissions_apart(tmp_path: Path) -> None:
    task = AnalyticsTask(id="an-1", category="qa", instruction="Total?", inputs=["a.xlsx"],
                         difficulty_steps=3, answer="12")
    store = RunStore(tmp_path / "run")
    store.save_tasks([task])
    assert store.track() == "analytics"
    sub = AnalyticsSubmission(id="an-1", answer="12", rounds=2,
                              files=[OutputFileRecord(name="out.xlsx", size=10, sha256="ab")])
    store.record(Episode(task_id="an-1", system="s", attempt=1, status="ok", submission=sub))
    (ep,) = store.episodes("s")
    assert isinstance(ep.submission, AnalyticsSubmission) and ep.submission == sub and ep.attempt == 1
    assert store.tasks_of(AnalyticsTask) == [task]
    with pytest.raises(Exception, match="analytics run, not a docqa run"):
        store.tasks_of(DocQATask)
    # a docqa run's submissions stay docqa submissions, and its tasks cannot be mixed in
    other = RunStore(tmp_path / "docqa")
    other.save_tasks([DocQATask(id="d1", question="q?", answer_variants=[["a"]])])
    other.record(Episode(task_id="d1", system="s", status="ok",
                         submission=DocQASubmission(id="d1", answer=["a"])))
    assert isinstance(other.episodes()[0].submission, DocQASubmission)
    with pytest.raises(Exception, match="holds a docqa run"):
        other.save_tasks([task])
