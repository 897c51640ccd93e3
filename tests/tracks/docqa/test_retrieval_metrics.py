"""Retrieval metrics of every search (tracks/docqa/scoring/retrieval.py): evidence recall@k, MRR
and evidence reached, overall and by hop type, on constructed submissions whose figures are
worked out by hand here; then through `deskbench score` on a predictions file, in its JSON and its
text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from deskbench.tasks.trajectory import AnswerStep, ToolCallStep
from deskbench.tracks.docqa.scoring.retrieval import retrieval_report
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask


def _task(tid: str, *pages: tuple[str, int]) -> DocQATask:
    return DocQATask(id=tid, question=f"question {tid}?", answer_variants=[["x"]],
                     evidence=[{"document": d, "page": p} for d, p in pages])  # type: ignore[misc]


def _search(*pages: tuple[str, int]) -> ToolCallStep:
    return ToolCallStep(name="search_documents", arguments={"query": "q"}, result={"pages": [list(p) for p in pages]})


def _sub(tid: str, *steps: Any) -> DocQASubmission:
    """A prediction carrying deskbench's trajectory, as a stored episode or a predictions file has it."""
    return DocQASubmission.model_validate({"id": tid, "question": f"question {tid}?", "answer": ["x"], "trajectory": [
        s.model_dump() for s in (*steps, AnswerStep(answer=["x"]))]})


TASKS = [_task("t1", ("a.pdf", 1)), _task("t2", ("a.pdf", 2), ("a.pdf", 3)), _task("t3", ("a.pdf", 1), ("b.pdf", 4)),
         _task("t4"), _task("t5", ("a.pdf", 1)), _task("t6", ("a.pdf", 1))]
SUBS = [
    # rank 2 then rank 1; a page view is no search
    _sub("t1", _search(("a.pdf", 2), ("a.pdf", 1), ("b.pdf", 1)),
         ToolCallStep(name="get_page", arguments={"file": "a.pdf", "page": 1}, result={"pages": [["a.pdf", 1]]}),
         _search(("a.pdf", 1))),
    _sub("t2", _search(("a.pdf", 3), ("b.pdf", 9), ("a.pdf", 2))),
    _sub("t3", _search(("c.pdf", 1)), _search(("b.pdf", 4), ("a.pdf", 9))),  # a.pdf 1 never returned
    _sub("t4", _search(("a.pdf", 1))),  # no gold pages: nothing to score against
    _sub("t5", ToolCallStep(name="search_documents", arguments={"query": "q"})),  # a query whose pages are unknown
    # t6 unanswered: no submission
]


def test_figures_by_hand() -> None:
    report = retrieval_report([(t, next((s for s in SUBS if s.id == t.id), None)) for t in TASKS])
    assert report is not None
    o = report.overall
    # scored searches: t1 (2), t2 (1), t3 (2)
    # recall@1  [0, 1, 1/2, 0, 1/2] -> 2/5; recall@5 and @10 [1, 1, 1, 0, 1/2] -> 3.5/5
    # reciprocal ranks [1/2, 1, 1, 0, 1] -> 3.5/5; every gold page returned: t1, t2, not t3 -> 2/3
    assert (o.episodes, o.searches) == (3, 5)
    assert o.recall_at == pytest.approx({1: 0.4, 5: 0.7, 10: 0.7})
    assert o.mrr == pytest.approx(0.7)
    assert o.evidence_reached == pytest.approx(2 / 3)
    single, page, doc = (report.by_hop_type[h] for h in ("single", "cross_page", "cross_doc"))
    assert (single.episodes, single.searches, single.mrr, single.evidence_reached) == (1, 2, 0.75, 1.0)
    assert single.recall_at == {1: 0.5, 5: 1.0, 10: 1.0}
    assert (page.searches, page.recall_at, page.mrr, page.evidence_reached) == (1, {1: 0.5, 5: 1.0, 10: 1.0}, 1.0, 1.0)
    assert (doc.searches, doc.recall_at, doc.mrr, doc.evidence_reached) == (2, {1: 0.25, 5: 0.25, 10: 0.25}, 0.5, 0.0)
    assert (report.episodes_without_search, report.searches_without_pages, report.tasks_without_evidence) == (1, 1, 1)


def test_no_search_anywhere_is_no_report() -> None:
    one_shot = [_sub("t1"), _sub("t2")]
    assert retrieval_report(zip(TASKS[:2], one_shot, strict=True)) is None


def test_an_official_trajectory_is_scored_from_its_search_results() -> None:
    """An imported official BM25-agent prediction: its searches come from the trajectory's tool
    results (imported.trajectory_of), as `deskbench import` reads them."""
    official = DocQASubmission.model_validate({
        "question": "question t2?", "answer": ["x"], "citations": [{"file": "a.pdf", "page": 2}],
        "trajectory": [{"role": "assistant", "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                        "tool_results": [{"name": "search_documents", "query": "q",
                                          "results": [{"file": "a.pdf", "page": 2}, {"file": "a.pdf", "page": 7}]}]}]})
    report = retrieval_report([(TASKS[1], official)])
    assert report is not None
    assert report.overall.searches == 1 and report.overall.recall_at == {1: 0.5, 5: 0.5, 10: 0.5}
    assert report.overall.mrr == 1.0 and report.overall.evidence_reached == 0.0


def test_score_prints_and_stores_them(tmp_path: Path) -> None:
    tasks, preds = tmp_path / "tasks.jsonl", tmp_path / "preds.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    preds.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in SUBS))
    scored = run_cli("score", str(preds), "--tasks", str(tasks), "--json")
    assert scored.returncode == 0, scored.stderr
    retrieval = json.loads(scored.stdout)["retrieval"]
    assert retrieval["overall"]["searches"] == 5 and retrieval["overall"]["recall_at"]["5"] == pytest.approx(0.7)
    assert retrieval["by_hop_type"]["cross_doc"]["evidence_reached"] == 0.0
    text = run_cli("score", str(preds), "--tasks", str(tasks))
    assert text.returncode == 0, text.stderr
    (line,) = [x for x in text.stdout.splitlines() if x.startswith("retrieval")]
    assert line.startswith("retrieval (deskbench's, 5 searches in 3 episodes): evidence recall @1 40.0%, @5 70.0%, "
                           "@10 70.0%; MRR 0.700; every gold page returned in 66.7% of episodes [X-Page: ")
    assert line.endswith("; not scored: 1 episodes without a search, 1 searches without returned pages, "
                         "1 tasks without gold pages")
