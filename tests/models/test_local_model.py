"""Every agent end to end against a real local llama.cpp server: the first test starts its own with
SmolLM2-135M, as `--model local` does; the agents run on the session's server (the small model of
tests/tiny_gguf.py; SmolLM2 with DESKBENCH_TEST_LOCAL_GGUF=smollm2).

Answers from either model are poor; these tests check the pipeline on the wire: the server starts
and stops, every episode is stored as ok or as an error with its reason, trajectories and usage
are real, and the run scores.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import run_cli

from deskbench.corpus import Corpus
from deskbench.models.types import ChatRequest, Message, ToolSpec
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep


def test_local_model_answers_text_and_tool_calls(local_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from deskbench.models.local_llama import URL_ENV
    from deskbench.models.registry import make_model

    monkeypatch.delenv(URL_ENV)  # this one starts (and stops) a server of its own, as `--model local` does

    tool = ToolSpec(name="provide_answer", description="Give the answer.",
                    parameters={"type": "object", "properties": {"answer": {"type": "array", "items": {"type": "string"}}},
                                "required": ["answer"]})

    async def go() -> tuple:
        model = make_model("local")
        try:
            text = await model.complete(ChatRequest(messages=[Message(role="user", content="Say hello.")], max_tokens=16))
            forced = await model.complete(ChatRequest(
                messages=[Message(role="user", content="What is the capital of France?")],
                tools=[tool], tool_choice="provide_answer", max_tokens=48))
            # A conversation that goes on after a tool call (llama-cpp-python's server rejects the
            # null content OpenAI uses for a tool-calling turn: the adapter must send "").
            follow = await model.complete(ChatRequest(
                messages=[Message(role="user", content="What is the capital of France?"), forced.message,
                          Message(role="tool", tool_call_id=forced.message.tool_calls[0].id, content="noted"),
                          Message(role="user", content="Say done.")], max_tokens=8))
            assert follow.message.text() or follow.message.tool_calls
            return text, forced, model
        finally:
            await model.aclose()

    text, forced, model = asyncio.run(go())
    assert text.message.text() and text.usage.input_tokens > 0 and text.usage.output_tokens > 0
    assert forced.message.tool_calls and forced.message.tool_calls[0].name == "provide_answer"
    json.loads(forced.message.tool_calls[0].arguments)  # valid JSON on the wire
    assert model._server.proc is None  # stopped


@pytest.mark.parametrize("agent", ["bm25-agent", "rag", "oracle", "guess"])
def test_every_agent_runs_against_the_local_model(local_model: str, agent: str, operator_corpus: Corpus, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {"id": "a", "question": "What do cars parked overnight pay?", "answer_variants": [["a fee"]],
         "evidence": [{"document": "alpha.pdf", "page": 2}]},
        {"id": "b", "question": "Which helicopter accessories catalogue is listed?", "answer_variants": [["Bell 407"]],
         "evidence": [{"document": "beta.pdf", "page": 2}]},
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", agent,
                   "--model", "local", "--view", "text", "--max-steps", "3", "--max-tokens", "96", "--concurrency", "2",
                   "--out", str(out), "--json", "--quiet", timeout=900)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()  # {system: report}
    assert report["n"] == 2 and 0.0 <= report["accuracy"] <= 1.0
    episodes = RunStore(out).episodes()
    assert sorted(e.task_id for e in episodes) == ["a", "b"]
    for e in episodes:
        assert e.status in ("ok", "error", "limit")
        assert (e.submission is not None) == (e.status == "ok") and (e.error is None) == (e.status == "ok")
        calls = [s for s in e.trajectory if isinstance(s, ModelCallStep)]
        assert all(c.input_tokens > 0 for c in calls) and e.usage.cost_usd == 0.0
        assert calls or (e.error or "").startswith("model call failed")
        assert e.usage.calls == len(calls)
        if agent == "rag":
            assert isinstance(e.trajectory[0], ToolCallStep)
    assert report["n_errors"] == sum(e.status != "ok" for e in episodes)
