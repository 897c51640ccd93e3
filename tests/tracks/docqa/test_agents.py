"""Agents end to end over the OpenAI wire (scripted replies), and `deskbench run` under faults."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.agents.base import AgentContext, AgentSettings
from deskbench.corpus import Corpus
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.docqa.agents.registry import make_agent
from deskbench.tracks.docqa.tasks import DocQATask

TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02, timeout=300.0)  # timeouts are tested with their own policy: a slow machine must not retry


def tool(name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}


ANSWER = tool("provide_answer", {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]})


def context(fake: FakeOpenAI, corpus: Corpus | None, **settings: Any) -> AgentContext:
    from deskbench.models.openai_chat import OpenAIChat
    model = OpenAIChat("fake", base_url=fake.base_url, api_key="k", id="openai-compat/fake")
    return AgentContext(model=ResilientModel(model, policy=FAST), corpus=corpus, settings=AgentSettings(**settings))


def run_agent(name: str, ctx: AgentContext, task: DocQATask = TASK) -> Any:
    return asyncio.run(make_agent(name).run(task, ctx))


def test_bm25_agent_searches_sees_pages_and_answers(operator_corpus: Corpus) -> None:
    script = lambda b, n: tool("search_documents", {"query": "mountain car"}) if n == 1 else ANSWER  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        result = run_agent("bm25-agent", context(fake, operator_corpus))
        assert result.status == "ok" and result.submission.answer == ["Mountain car"]
        assert result.submission.steps == 1 and result.submission.search_history == ["mountain car"]
        assert [type(s) for s in result.trajectory] == [ModelCallStep, ToolCallStep, ModelCallStep]
        assert result.trajectory[1].result == {"pages": [["alpha.pdf", 1]]}
        second = fake.requests[1]["messages"]
        assert second[0]["role"] == "system" and "search tool" in second[0]["content"]
        tool_msg = next(m for m in second if m["role"] == "tool")
        assert json.loads(tool_msg["content"]) == {"results": [{"file": "alpha.pdf", "page": 1}]}
        images = [p for m in second if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image_url"]
        assert len(images) == 1 and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
        assert result.usage.calls == 2


def test_official_agent_defaults_on_the_wire(operator_corpus: Corpus, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`deskbench run`'s own path (RunSpec -> prepare -> execute) with no flags: page images at
    200 DPI and no output-token field for an OpenAI model, as the official MADQA agents
    (utils.get_pdf_page_as_png(dpi=200); openai_agent.py sends no max_tokens), and T = 10."""
    import base64
    import io

    import pypdfium2 as pdfium
    from PIL import Image

    from deskbench.runs.track import execute_run
    from deskbench.tracks.docqa.run import RunSpec, prepare

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    script = lambda b, n: tool("search_documents", {"query": "mountain car"}) if n == 1 else ANSWER  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        spec = RunSpec(agent="bm25-agent", model="openai/gpt-4.1", out=tmp_path / "run", corpus=operator_corpus.root,
                       concurrency=1)
        assert execute_run(prepare(spec, [TASK]))[0].counts.done == 1
        bodies = list(fake.requests)
    assert len(bodies) == 2 and not any(k in b for b in bodies for k in ("max_tokens", "max_completion_tokens"))
    url = next(p["image_url"]["url"] for m in bodies[1]["messages"] if isinstance(m["content"], list)
               for p in m["content"] if p["type"] == "image_url")
    width, height = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size
    pdf = pdfium.PdfDocument(str(operator_corpus.pdf_path("alpha.pdf")))
    points_w, points_h = pdf[0].get_size()
    pdf.close()
    assert abs(width - points_w * 200 / 72) <= 1 and abs(height - points_h * 200 / 72) <= 1

    always_search = lambda b, n: tool("search_documents", {"query": "mountain car"})  # noqa: E731
    with FakeOpenAI(script=always_search) as fake:
        result = run_agent("bm25-agent", context(fake, operator_corpus, view="text"))  # AgentSettings() defaults
        assert result.status == "limit" and result.error == "no answer after 10 iterations"
        assert len(fake.requests) == 10 and fake.requests[-1]["tool_choice"]["function"]["name"] == "provide_answer"


def test_bm25_agent_text_view_and_malformed_queries(operator_corpus: Corpus) -> None:
    """A malformed query is searched as MADQA's Whoosh tool searches it, not refused: the
    unbalanced quote is an ordinary character, the dangling AND the stop word "and"."""
    script = lambda b, n: {1: tool("search_documents", {"query": '"harbour authority'}),  # noqa: E731
                           2: tool("search_documents", {"query": "(helicopter AND"})}.get(n, ANSWER)
    with FakeOpenAI(script=script) as fake:
        result = run_agent("bm25-agent", context(fake, operator_corpus, view="text"))
        assert result.status == "ok" and result.submission.steps == 2
        tool_results = [m["content"] for m in fake.requests[2]["messages"] if m["role"] == "tool"]
        assert [json.loads(r) for r in tool_results] == [{"results": [{"file": "alpha.pdf", "page": 2}]},
                                                         {"results": [{"file": "beta.pdf", "page": 2}]}]
        assert "Annual report of the harbour authority" in json.dumps(fake.requests[1]["messages"])  # text view


def test_last_iteration_forces_the_answer(operator_corpus: Corpus) -> None:
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        forced = isinstance(body.get("tool_choice"), dict)
        return ANSWER if forced else tool("search_documents", {"query": f"q{n}"})

    with FakeOpenAI(script=script) as fake:
        result = run_agent("bm25-agent", context(fake, operator_corpus, max_steps=3))
        assert result.status == "ok" and result.submission.iterations == 3
        last = fake.requests[-1]
        assert last["tool_choice"] == {"type": "function", "function": {"name": "provide_answer"}}
        assert [t["function"]["name"] for t in last["tools"]] == ["provide_answer"]


def test_malformed_answer_gets_one_repair_then_errors(operator_corpus: Corpus) -> None:
    broken = tool("provide_answer", '{"answer": "Mountain car", "citations": [')
    with FakeOpenAI(script=lambda b, n: broken if n == 1 else ANSWER) as fake:
        result = run_agent("bm25-agent", context(fake, operator_corpus))
        assert result.status == "ok" and "could not be used" in json.dumps(fake.requests[1]["messages"])
    with FakeOpenAI(script=lambda b, n: broken) as fake:
        result = run_agent("bm25-agent", context(fake, operator_corpus))
        assert result.status == "error" and result.error.startswith("unparseable answer")
        assert len(fake.requests) == 2


@pytest.mark.parametrize("agent", ["rag", "oracle", "guess"])
def test_single_call_agents(agent: str, operator_corpus: Corpus) -> None:
    reply = {"kind": "text", "text": 'Sure: {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}'}
    with FakeOpenAI(script=lambda b, n: {"kind": "text", "text": "I think it is cars"} if n == 1 else reply) as fake:
        result = run_agent(agent, context(fake, operator_corpus))
        assert result.status == "ok" and result.submission.answer == ["Mountain car"]
        assert len(fake.requests) == 2  # the unreadable first reply got one repair turn
        sent = fake.requests[0]
        assert sent["response_format"]["type"] == "json_schema"
        parts = sent["messages"][1]["content"]
        n_images = sum(p["type"] == "image_url" for p in parts)
        if agent == "guess":
            assert n_images == 0 and "GUESS" in sent["messages"][0]["content"]
        elif agent == "oracle":
            assert n_images == 1 and {"type": "text", "text": "file: alpha.pdf page: 1"} in parts
        else:
            assert 1 <= n_images <= 5 and isinstance(result.trajectory[0], ToolCallStep)


def _faulty(rate: float, seed: int) -> Any:
    rng = random.Random(seed)
    lock = threading.Lock()

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        with lock:
            roll = rng.random()
        if roll < rate / 3:
            return {"kind": "status", "status": 429, "retry_after": "0.05"}
        if roll < 2 * rate / 3:
            return {"kind": "status", "status": 500}
        if roll < rate:
            return tool("provide_answer", '{"answer": [')  # malformed tool call
        if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
            return tool("search_documents", {"query": "annual report"})
        return ANSWER

    return script


def _tasks_file(tmp_path: Path, n: int) -> Path:
    rows = [TASK.model_copy(update={"id": f"q{i}"}).model_dump(mode="json") for i in range(n)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_run_under_faults_loses_no_episode(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path, 30)
    with FakeOpenAI(script=_faulty(0.2, seed=1)) as fake:
        proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "bm25-agent",
                       "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(tmp_path / "run"),
                       "--concurrency", "8", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()  # {system: report}
    store = RunStore(tmp_path / "run")
    episodes = store.episodes()
    assert len(episodes) == 30 and len({e.task_id for e in episodes}) == 30
    assert {e.status for e in episodes} <= {"ok", "error"}
    errors = [e for e in episodes if e.status == "error"]
    assert all(e.error for e in errors)
    assert report["n"] == 30 and report["n_errors"] == len(errors)
    assert report["accuracy"] == pytest.approx((30 - len(errors)) / 30)  # every ok episode answers right
    (rescored,) = json.loads(run_cli("score", str(tmp_path / "run"), "--json").stdout).values()
    assert rescored["accuracy"] == report["accuracy"]  # re-scored from the store alone


def _episode_count(db: Path) -> int:
    """Episodes committed so far; 0 while the run has not yet created its file or tables."""
    try:
        con = sqlite3.connect(db, timeout=1)
        try:
            return int(con.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_kill_9_mid_run_then_resume(operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path, 40)
    run_dir = tmp_path / "run"
    # Past the 20th request (two an episode), answers wait for the kill: the run cannot finish
    # before it, however fast or slow the machine (it used to race a 0.15 s latency).
    held = threading.Event()

    def script(b: dict[str, Any], n: int) -> dict[str, Any]:
        if n > 20:
            held.wait(300)
        return (tool("search_documents", {"query": "fee"})
                if b.get("tools") and not any(m["role"] == "tool" for m in b["messages"]) else ANSWER)

    with FakeOpenAI(script=script) as fake:
        args = [sys.executable, "-m", "deskbench.cli", "run", "--tasks", str(tasks), "--corpus",
                str(operator_corpus.root), "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(run_dir),
                "--concurrency", "4", "--quiet"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            count = _episode_count(run_dir / "run.sqlite")
            if count >= 5:
                break
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        held.set()
        before = len(RunStore(run_dir).episodes())
        assert 5 <= before < 40
        resumed = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert f"{40 - before} episodes run" in resumed.stderr and f"{before} already done" in resumed.stderr
    episodes = RunStore(run_dir).episodes()
    assert len(episodes) == 40 and len({e.task_id for e in episodes}) == 40
