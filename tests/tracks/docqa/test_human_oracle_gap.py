"""MADQA's own Oracle Gap (§5: people given the gold pages against the best agent), computed when a
run holds human-oracle episodes, in `deskbench score` (per annotator and with --pool-humans) and in
the report, named apart from deskbench's same-model gap to the oracle; figures worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.report.data import build_report
from deskbench.report.render import render_html
from deskbench.runs.identity import SystemConfig, remember_config
from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.docqa.report_models import DocqaSection
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

# system -> task -> (answer, minute it finished); "x" is right
ANSWERS: dict[str, dict[str, tuple[str, int]]] = {
    "human-oracle:alice": {"t1": ("x", 1), "t2": ("x", 2)},
    "human-oracle:bob": {"t2": ("wrong", 5), "t3": ("x", 6)},  # t2: alice answered first, hers counts
    "human:carol": {"t1": ("x", 1), "t2": ("x", 1), "t3": ("x", 1)},  # searched: a person, not an agent
    "oracle:openai/gpt-4.1": {"t1": ("x", 1), "t2": ("x", 1), "t3": ("x", 1), "t4": ("x", 1)},  # not an agent
    "bm25-agent:openai/gpt-4.1": {"t1": ("x", 1), "t2": ("wrong", 1), "t3": ("wrong", 1), "t4": ("x", 1)},
    "rag:openai/gpt-5": {"t1": ("x", 1), "t2": ("x", 1), "t3": ("wrong", 1), "t4": ("wrong", 1)},
}
# The human oracle: t1 alice 1, t2 alice 1, t3 bob 1 -> 3 of 3 on t1-t3 (t4 nobody answered).
# Over t1-t3: bm25-agent 1/3, rag 2/3 -> the best agent is rag; the gap 1 - 2/3 = 1/3 (+33.3 points).


def _run(root: Path) -> Path:
    store = RunStore(root / "run")
    store.save_tasks([DocQATask(id=t, question=f"question {t}?", answer_variants=[["x"]]) for t in ("t1", "t2", "t3", "t4")])
    for system, answers in ANSWERS.items():
        if not system.startswith("human"):
            agent, model = system.split(":", 1)
            remember_config(store, system, SystemConfig(track="docqa", agent=agent, model=model))
        for task, (answer, minute) in answers.items():
            when = datetime(2026, 1, 1, 0, minute, tzinfo=UTC).isoformat()
            store.record(Episode(task_id=task, system=system, status="ok", started_at=when, finished_at=when,
                                 submission=DocQASubmission(id=task, question=f"question {task}?", answer=[answer])))
    store.close()
    return root / "run"


@pytest.mark.parametrize("pool", [False, True])
def test_score_gives_madqas_oracle_gap(tmp_path: Path, pool: bool) -> None:
    run = _run(tmp_path)
    args = ["score", str(run), "--json"] + (["--pool-humans"] if pool else [])
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(proc.stdout)
    rows = ["human-oracle"] if pool else ["human-oracle:alice", "human-oracle:bob"]
    for row in rows:
        gap = reports[row]["madqa_oracle_gap"]
        assert (gap["best"], gap["n"], gap["human_oracle_accuracy"]) == ("rag:openai/gpt-5", 3, 1.0)
        assert gap["best_accuracy"] == pytest.approx(2 / 3) and gap["gap"] == pytest.approx(1 / 3)
        assert set(gap["by_agent"]) == {"bm25-agent:openai/gpt-4.1", "rag:openai/gpt-5"}
        assert gap["by_agent"]["bm25-agent:openai/gpt-4.1"]["gap"] == pytest.approx(2 / 3)
    for agent in ("rag:openai/gpt-5", "bm25-agent:openai/gpt-4.1", "oracle:openai/gpt-4.1"):
        assert reports[agent]["madqa_oracle_gap"] is None
    # deskbench's own gap stays as it was, and apart: bm25-agent against its model's oracle over t1-t4
    assert reports["bm25-agent:openai/gpt-4.1"]["oracle_gap"]["gap"] == pytest.approx(0.5)
    text = " ".join(run_cli(*[a for a in args if a != "--json"]).stdout.split())
    assert ("MADQA's Oracle Gap (§5: people given the gold pages against the best agent): +33.3 points over the 3 "
            "tasks both scored (human-oracle 100.0% against rag:openai/gpt-5 66.7%, raw item scores)") in text


def test_no_human_oracle_scored_no_gap(tmp_path: Path) -> None:
    run = _run(tmp_path)
    proc = run_cli("score", str(run), "--system", "rag:openai/gpt-5", "--system", "human:carol")
    assert proc.returncode == 0, proc.stderr
    assert "MADQA's Oracle Gap" not in proc.stdout  # people who searched are not the human oracle


def test_report_shows_madqas_oracle_gap(tmp_path: Path) -> None:
    run = _run(tmp_path)
    report = build_report([run])
    data = report.section("docqa").data
    assert isinstance(data, DocqaSection)
    [gap] = data.madqa_oracle_gaps
    assert (gap.best, gap.n, gap.run) == ("rag:openai/gpt-5", 3, str(run))
    assert gap.gap == pytest.approx(1 / 3)
    html = render_html(report)
    table = html[html.index('id="madqa-oracle-gap-table"'):]
    table = table[:table.index("</table>")]
    assert "rag:openai/gpt-5" in table and "+33.3" in table
    assert "MADQA reports 17.2 points" in html
