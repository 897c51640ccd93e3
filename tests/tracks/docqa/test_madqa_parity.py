"""Parity with the official MADQA evaluator (github OxRML/MADQA eval/, commit in vectors.json).

tests/data/madqa_parity holds predictions in every shape the official agents write (BM25 agent,
RLM baseline, error rows, rows without id, unreadable citations, ...) and the official
`evaluate_file` output on them, computed once with the official code by generate.py there (facts,
not code). `deskbench score --official` must reproduce every official metric to 1e-9, overall, by
hop type, by category and by domain, with ANLS* and with a (scripted) judge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all
from deskbench.tracks.docqa.scoring.docqa_summary import summarize
from deskbench.tracks.docqa.scoring.judge import Judgement
from deskbench.tracks.docqa.tasks import read_submissions, read_tasks

DATA = Path(__file__).parents[2] / "data" / "madqa_parity"
VECTORS = json.loads((DATA / "vectors.json").read_text())
FILES = ("bm25", "rlm", "edge")


def _as_read(value: Any) -> Any:
    """A predicted answer as deskbench reads it (items as text, the evaluator's str(item))."""
    if isinstance(value, list):
        return [v if isinstance(v, str) else str(v) for v in value]
    return value


class TableJudge:
    """The verdicts the official run was given (judge.json), keyed by what the judge is shown."""

    name = "scripted-official"

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.verdicts: dict[str, str] = {}
        for row in json.loads((DATA / "judge.json").read_text()):
            question, predicted = json.loads(row["question_and_predicted"])
            self.verdicts[json.dumps([question, _as_read(predicted)])] = row["verdict"]

    async def judge(self, question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]) -> Judgement:
        shown = predicted if isinstance(predicted, str) else list(predicted)
        self.asked.append((question, shown))
        verdict = self.verdicts[json.dumps([question, shown])]
        return Judgement("unscored", error="scripted failure") if verdict == "error" else Judgement(verdict)  # type: ignore[arg-type]


def _official(name: str, judge: TableJudge | None) -> dict[str, Any]:
    tasks = read_tasks(DATA / "tasks.jsonl").items
    subs = read_submissions(DATA / f"{name}.jsonl", official=True).rows.items
    opts = ScoreOptions(official=True, judge=judge)
    items, matched = score_all(tasks, subs, opts)
    report = summarize(items, matched, opts, by=("domain", "category"))
    assert report.official_metrics is not None
    return report.official_metrics.model_dump(mode="json")


def _assert_same(ours: Any, theirs: Any, where: str) -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) >= set(theirs), f"{where}: keys {sorted(theirs)} vs {sorted(ours)}"
        for key, value in theirs.items():
            _assert_same(ours[key], value, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _assert_same(a, b, f"{where}[{k}]")
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, abs=1e-9, rel=0), f"{where}: {ours} vs official {theirs}"
    else:
        assert ours == theirs, f"{where}: {ours!r} vs official {theirs!r}"


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("mode", ["anls", "semantic"])
def test_every_official_metric_matches(name: str, mode: str) -> None:
    judge = TableJudge() if mode == "semantic" else None
    theirs = VECTORS["results"][f"{name}/{mode}"]
    ours = _official(name, judge)
    assert theirs["overall"]["n"] == ours["overall"]["n"]
    for part in ("overall", "by_hop_type", "by_category", "by_domain"):
        _assert_same(ours[part], theirs[part], f"{name}/{mode}.{part}")
    assert set(ours["by_hop_type"]) == set(theirs["by_hop_type"])
    assert set(ours["by_category"]) == set(theirs["by_category"]) and set(ours["by_domain"]) == set(theirs["by_domain"])
    if judge is not None:  # the official evaluator shows the judge the prediction's own question text
        assert judge.asked and all(q for q, _ in judge.asked)


def test_the_vectors_cover_every_official_shape() -> None:
    """Guards the fixture: each shape the issue lists is in the files scored above."""
    edge = [json.loads(line) for line in (DATA / "edge.jsonl").read_text().splitlines()]
    bm25 = [json.loads(line) for line in (DATA / "bm25.jsonl").read_text().splitlines()]
    rlm = [json.loads(line) for line in (DATA / "rlm.jsonl").read_text().splitlines()]
    assert any("answer" not in r and "error" in r for r in edge)  # error rows
    assert any("id" not in r for r in edge)  # no id
    assert any(isinstance(r.get("search_history"), list) and r["search_history"]
               and isinstance(r["search_history"][0], dict) for r in bm25)  # dict search histories
    assert all(isinstance(r["trajectory"], dict) and "llm_calls" in r["trajectory"] for r in rlm)  # RLM
    assert any(isinstance(r.get("answer"), list) and None in r["answer"] for r in edge)  # null answer item
    cites = [c for r in edge for c in r.get("citations", [])]
    assert any("page" not in c for c in cites) and any(c.get("page") == "p. 2" for c in cites)
    assert VECTORS["source"]["commit"] and VECTORS["source"]["files"] == ["eval/evaluate.py", "eval/metrics.py"]


def test_cli_official_json_carries_the_official_keys() -> None:
    proc = run_cli("score", str(DATA / "edge.jsonl"), "--tasks", str(DATA / "tasks.jsonl"), "--official", "--json",
                   "--by", "domain", "--by", "category")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    _assert_same(report["official_metrics"]["overall"], VECTORS["results"]["edge/anls"]["overall"], "cli")
    assert "1 submissions match no task" in proc.stderr  # the one row matching no question: dropped
    assert "carry the id of another task" in proc.stderr  # text beat id, as the official evaluator
