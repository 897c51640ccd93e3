"""The gap to the oracle (tracks/docqa/scoring/oracle_gap.py): on a run built here with an oracle
and another system on one model and a third on another model, `deskbench score` gives the paired
gap over the tasks both scored, overall and by hop type, worked out by hand; the pairing rule."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from deskbench.runs.identity import Build, SystemConfig, SystemIdentity, remember_config
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.scoring.oracle_gap import oracle_of
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

EVIDENCE = {"t1": [("a.pdf", 1)], "t2": [("a.pdf", 2), ("a.pdf", 3)], "t3": [("a.pdf", 1), ("b.pdf", 4)],
            "t4": [("a.pdf", 5)]}
ANSWERS = {  # system -> task -> answer ("x" is right)
    "oracle:openai/gpt-4.1": {"t1": "x", "t2": "x", "t3": "x"},  # t4 not run
    "bm25-agent:openai/gpt-4.1": {"t1": "x", "t2": "wrong", "t3": "wrong", "t4": "x"},
    "rag:openai/gpt-5": {"t1": "x", "t2": "x"},  # no oracle on its model
}
SEARCHES = {  # bm25-agent's searches (a stored episode keeps them in its trajectory); none for t3
    "t1": [("a.pdf", 1)], "t2": [("a.pdf", 3), ("c.pdf", 1)], "t4": [("a.pdf", 9)]}


def _run(root: Path) -> Path:
    store = RunStore(root / "run")
    store.save_tasks([DocQATask(id=t, question=f"question {t}?", answer_variants=[["x"]],
                                evidence=[{"document": d, "page": p} for d, p in pages])  # type: ignore[misc]
                      for t, pages in EVIDENCE.items()])
    for system, answers in ANSWERS.items():
        agent, model = system.split(":", 1)
        remember_config(store, system, SystemConfig(track="docqa", agent=agent, model=model, settings={"view": "image"}))
        for task, answer in answers.items():
            found = SEARCHES.get(task) if agent == "bm25-agent" else None
            store.record(Episode(task_id=task, system=system, status="ok",
                                 submission=DocQASubmission(id=task, question=f"question {task}?", answer=[answer]),
                                 trajectory=[] if found is None else [ToolCallStep(
                                     name="search_documents", arguments={"query": "q"},
                                     result={"pages": [list(p) for p in found]})]))
    return root / "run"


def test_score_gives_the_gap_over_the_tasks_both_scored(tmp_path: Path) -> None:
    run = _run(tmp_path)
    scored = run_cli("score", str(run), "--json")
    assert scored.returncode == 0, scored.stderr
    reports = json.loads(scored.stdout)
    gap = reports["bm25-agent:openai/gpt-4.1"]["oracle_gap"]
    # t1, t2, t3 both scored: the oracle 3/3, bm25-agent 1/3 (t4 only bm25-agent ran: left out)
    assert gap["oracle"] == "oracle:openai/gpt-4.1" and gap["n"] == 3
    assert (gap["oracle_accuracy"], round(gap["accuracy"], 6), round(gap["gap"], 6)) == (1.0, round(1 / 3, 6), round(2 / 3, 6))
    hops = gap["by_hop_type"]
    assert [(hops[h]["n"], hops[h]["gap"]) for h in ("single", "cross_page", "cross_doc")] == [(1, 0.0), (1, 1.0), (1, 1.0)]
    # bm25-agent's searches, read from its stored episodes: t1, t2, t4 (t3 made none)
    # recall@1 and @5 [1, 1/2, 0] -> 1/2; reciprocal ranks [1, 1, 0] -> 2/3; all gold pages returned: t1 only
    retrieval = reports["bm25-agent:openai/gpt-4.1"]["retrieval"]
    assert (retrieval["overall"]["searches"], retrieval["overall"]["recall_at"]["1"],
            retrieval["overall"]["recall_at"]["5"]) == (3, 0.5, 0.5)
    assert round(retrieval["overall"]["mrr"], 6) == round(2 / 3, 6)
    assert round(retrieval["overall"]["evidence_reached"], 6) == round(1 / 3, 6)
    assert retrieval["episodes_without_search"] == 1
    assert reports["oracle:openai/gpt-4.1"]["retrieval"] is None  # it searched for nothing
    assert reports["oracle:openai/gpt-4.1"]["oracle_gap"] is None  # an oracle has no gap to itself
    assert reports["rag:openai/gpt-5"]["oracle_gap"] is None  # no oracle on its model
    text = run_cli("score", str(run))
    assert ("gap to the oracle (oracle:openai/gpt-4.1, the same model given the gold pages) of "
            "bm25-agent:openai/gpt-4.1: +66.7 points of accuracy over the 3 tasks both scored (100.0% against "
            "33.3%, raw item scores); single-hop +0.0 (n=1), X-Page +100.0 (n=1), X-Doc +100.0 (n=1)") in " ".join(
                text.stdout.split())


def test_pairing_by_model_then_by_view() -> None:
    def ident(agent: str, model: str | None, view: str = "image") -> SystemIdentity:
        return SystemIdentity(config=SystemConfig(track="docqa", agent=agent, model=model, settings={"view": view}),
                              latest=Build())

    ids = {"oracle:m": ident("oracle", "m"), "bm25-agent:m": ident("bm25-agent", "m"), "guess:none": ident("guess", None)}
    assert oracle_of("bm25-agent:m", ids) == "oracle:m"
    assert oracle_of("oracle:m", ids) is None and oracle_of("guess:none", ids) is None and oracle_of("x", ids) is None
    ids |= {"oracle:m-text": ident("oracle", "m", "text"), "rag:m-text": ident("rag", "m", "text")}
    assert oracle_of("rag:m-text", ids) == "oracle:m-text"  # two oracles on m: the one shown the same view
    ids |= {"rag:m-both": ident("rag", "m", "both")}
    assert oracle_of("rag:m-both", ids) is None  # neither was shown its view: no pairing is made up


def test_the_report_shows_both(tmp_path: Path) -> None:
    run = _run(tmp_path)
    html_path = tmp_path / "report.html"
    made = run_cli("report", str(run), "--output", str(html_path))
    assert made.returncode == 0, made.stderr
    html = html_path.read_text(encoding="utf-8")
    table = html[html.index('<table id="retrieval-table">'):]
    table = table[:table.index("</table>")]
    row = next(r for r in table.split("<tr>") if "bm25-agent" in r)
    assert "<td>3</td><td>3</td><td>50.0</td><td>50.0</td><td>50.0</td><td>0.667</td><td>33.3</td>" in row
    assert "+66.7 <small>(vs oracle:openai/gpt-4.1, n=3)</small>" in row
    assert "no search scored" in next(r for r in table.split("<tr>") if "rag:" in r or "rag</td>" in r)

