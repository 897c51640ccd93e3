"""deskbench's bm25-agent on an `openai/` model sends what the official openai_agent.py sends.

The official requests were recorded by running github OxRML/MADQA's baselines/bm25-mllm-agent/
openai_agent.py, unmodified, against a scripted local server over the shared scenario
(scripts/official_requests/record_openai.py; tests/data/official_requests/openai.json says which
commit and SDK). Here `deskbench run`, with its defaults (the official preset: the provider's
script, 5 iterations, top 4), runs the same scenario through the real OpenAI adapter against the
strict simulator (tests/sim_openai.py, profile openai), which answers from the same reply
script; both sides are normalised alike (scripts/official_requests/common.py: images as
mime/width/height, tool-call ids by order of appearance) and compared element by element.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from sim_openai import SimOpenAI

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "official_requests"
sys.path.insert(0, str(ROOT / "scripts" / "official_requests"))
from common import as_data_urls, differences, elements, equal_elements, normalise  # noqa: E402

MODEL = "gpt-5-mini-2025-08-07"  # openai_agent.py's default model
SCENARIO = json.loads((DATA / "scenario.json").read_text(encoding="utf-8"))
FIXTURE = json.loads((DATA / "openai.json").read_text(encoding="utf-8"))
QUESTIONS = {q["question"]: q for q in SCENARIO["questions"]}


def behaviour(abstract: dict[str, Any]) -> dict[str, Any]:
    """An abstract reply as OpenAI's: text or the Answer JSON as content, one call per search
    (record_openai.py's mapping)."""
    content = json.dumps(abstract["answer"], ensure_ascii=False) if "answer" in abstract else abstract.get("text")
    calls = [{"name": "search_documents", "arguments": json.dumps({"query": q}, ensure_ascii=False)}
             for q in abstract.get("search", [])]
    return {"kind": "message", "content": content, "calls": calls}


def script(body: dict[str, Any], n: int) -> dict[str, Any]:
    """The reply to a request: its question's script, at the step its assistant turns say."""
    question = QUESTIONS[body["messages"][1]["content"]]
    step = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    return behaviour(question["replies"][step])


@pytest.fixture(scope="module")
def deskbench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], SimOpenAI]:
    """`deskbench ingest` of the scenario's PDFs with its page text, then `deskbench run` with the
    defaults against the simulator; the run directory and the requests the simulator accepted."""
    tmp = tmp_path_factory.mktemp("official_openai")
    ingest = run_cli("ingest", str(DATA / "pdfs"), "--corpus", str(tmp / "corpus"),
                     "--page-text", str(DATA / "page_text.jsonl"))
    assert ingest.returncode == 0, ingest.stderr
    tasks = tmp / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": q["id"], "question": q["question"], "answer_variants": [["x"]]}) + "\n"
                             for q in SCENARIO["questions"]), encoding="utf-8")
    with SimOpenAI(profile="openai", script=script, models={MODEL}) as sim:
        proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(tmp / "corpus"), "--model", f"openai/{MODEL}",
                       "--out", str(tmp / "run"), "--concurrency", "1", "--quiet",
                       env={"OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": "sk-test"})
        assert proc.returncode == 0, proc.stderr
        assert sim.refused == [], sim.refused[:1]
        sent = [{"method": "POST", "path": "/v1/chat/completions",
                 "headers": {"content-type": h.get("content-type", h.get("Content-Type"))}, "body": body}
                for body, h in zip(sim.requests, sim.headers, strict=True)]
    return tmp / "run", sent, sim


def _by_question(sent: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in sent:
        grouped.setdefault(QUESTIONS[r["body"]["messages"][1]["content"]]["id"], []).append(r)
    return grouped


def test_every_request_element_equals_the_official_scripts(deskbench_run: Any) -> None:
    _, sent, _ = deskbench_run
    mine = _by_question(sent)
    total = same = 0
    problems: list[str] = []
    for official in FIXTURE["questions"]:
        ids: dict[str, str] = {}
        got = [{**r, "body": normalise(r["body"], ids)} for r in mine.get(official["id"], [])]
        total += elements(official["requests"])
        same += equal_elements(official["requests"], got)
        problems += [f"{official['id']}{d}" for d in differences(official["requests"], got)]
    print(f"openai_agent.py: {same} of {total} request elements equal over {len(FIXTURE['questions'])} questions")
    assert problems == [], "\n".join(problems[:20])
    assert same == total and total > 1000


def test_the_outcomes_are_the_official_scripts(deskbench_run: Any) -> None:
    """What each question ends with: the official result (answer, citations, iterations, search
    history) where the script returned one, an error where it raised."""
    run_dir, _, _ = deskbench_run
    db = sqlite3.connect(run_dir / "run.sqlite")
    rows = {task: (status, json.loads(sub) if sub else None, error) for task, status, sub, error in
            db.execute("SELECT task_id, status, submission, error FROM episodes")}
    for official in FIXTURE["questions"]:
        status, submission, error = rows[official["id"]]
        if "error" in official:
            assert status == "error" and error and "unparseable answer" in error, (official["id"], status, error)
            continue
        want = official["result"]
        assert status == "ok", (official["id"], error)
        assert submission["answer"] == want["answer"]
        assert [{"file": c.get("file", c.get("document")), "page": c["page"]} for c in submission["citations"]] \
            == want["citations"]
        assert submission["iterations"] == want["iterations"]
        assert submission["search_history"] == want["search_history"]


def test_the_run_records_the_protocol_and_where_its_defaults_come_from(deskbench_run: Any) -> None:
    run_dir, _, _ = deskbench_run
    info = run_cli("info", str(run_dir), "--json")
    assert info.returncode == 0, info.stderr
    (system,) = json.loads(info.stdout)["systems"].values()
    settings = system["config"]["settings"]
    assert settings["protocol"] == "openai_agent.py" and settings["max_steps"] == 5 and settings["top_k"] == 4
    assert settings["protocol_source"].startswith("OxRML/MADQA@978fa76de16acf983363557823f4f2d1ed74ba47 ")
    assert settings["protocol_source"].endswith("baselines/bm25-mllm-agent/openai_agent.py")
    assert "process_dataset.py" in settings["sources"]["max_steps"] and "process_dataset.py" in settings["sources"]["top_k"]


def test_the_simulator_accepts_the_official_requests() -> None:
    """The recorded requests worked against the real service: the strict simulator accepts them
    too (images put back as real PNGs of the recorded size)."""
    with SimOpenAI(profile="openai", models={MODEL}) as sim:
        for official in FIXTURE["questions"]:
            for r in official["requests"]:
                found = sim.check(as_data_urls(r["body"]), {"authorization": "Bearer sk-test", "content-type": "application/json"})
                assert found is None, (official["id"], found)
