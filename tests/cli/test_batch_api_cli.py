"""`deskbench run --batch-api` (a rag run) and `deskbench score RUN --judge ... --batch-api` end to end
against the OpenAI Batch simulator (tests/sim_openai_batch.py), each killed with SIGKILL while its
batch is in progress and run again: the second process polls the batch the first one submitted
(the run store's journal) and submits nothing twice; every call is paid at the batch price and
its transcript entry names its batch.

Prices: gpt-4o-mini is $0.15 / $0.60 per million tokens (models/prices.py); every simulated reply
counts 100 input and 20 output tokens: $0.000027 a call, $0.0000135 in a batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli_process
from sim_openai_batch import SimOpenAIBatch

from deskbench.corpus import Corpus
from deskbench.models.batch.base import BATCH_KEY, REQUEST_KEY
from deskbench.runs.store import RunStore
from deskbench.runs.transcript import ModelCallEvent

HALF = (100 * 0.15 + 20 * 0.60) / 1e6 / 2
MODEL = "openai/gpt-4o-mini"
ANSWER = {"answer": ["the mountain car rates"], "citations": [{"file": "alpha.pdf", "page": 1}]}
QUESTIONS = ["Which vehicle rental rates are given for the winter season?", "What is listed in the catalogue?",
             "When was the company incorporated?"]


def _reply(body: dict[str, Any], n: int) -> dict[str, Any]:
    if any(t["function"]["name"] == "submit_judgment" for t in body.get("tools") or []):
        return {"kind": "tool", "name": "submit_judgment",
                "arguments": json.dumps({"judgment": "correct", "main_issue": "none", "explanation": "same"})}
    return {"kind": "text", "text": json.dumps(ANSWER)}


def _env(sim: SimOpenAIBatch, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    return {**env, **sim.env(), "DESKBENCH_CACHE_DIR": str(tmp_path / "cache"), "DESKBENCH_BATCH_POLL": "0.05",
            "DESKBENCH_BATCH_WINDOW": "0.5"}


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answer_variants": [["Mountain car"]],
                                        "evidence": [{"document": "alpha.pdf", "page": 1}]}) + "\n"
                            for i, q in enumerate(QUESTIONS)))
    return path


def _wait(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    """Until `condition` holds (the simulator's state, not a clock, decides); a process that ends
    first, or a condition never met in two minutes, fails the test with the process's output."""
    deadline = time.monotonic() + 120
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"{what} never happened; the command said:\n{out}\n{err}")
        time.sleep(0.02)


def _polled(sim: SimOpenAIBatch, requests: int) -> bool:
    """`requests` lines submitted, and every batch polled once (its ids are in the journal by then)."""
    polled = {p.rstrip("/").rsplit("/", 1)[-1] for m, p, _ in list(sim.requests) if m == "GET" and "/batches/" in p}
    return len(sim.lines()) == requests and set(sim.batches) <= polled


def _killed(args: list[str], env: dict[str, str], sim: SimOpenAIBatch, requests: int) -> None:
    """`deskbench ARGS` started, killed with SIGKILL once its batches are submitted and polled."""
    proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    _wait(lambda: _polled(sim, requests), proc, "the batch submission")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def test_a_killed_batched_rag_run_and_its_judged_score_resume_their_batches(operator_corpus: Corpus,
                                                                            tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = ["run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(operator_corpus.root), "--agent", "rag",
           "--model", MODEL, "--out", str(out), "--batch-api", "--quiet"]
    with SimOpenAIBatch(script=_reply, hold=True) as sim:
        env = _env(sim, tmp_path)
        _killed(run, env, sim, len(QUESTIONS))
        submitted = sim.created
        assert RunStore(out).episodes() == []  # killed before any reply
        sim.release()
        again = run_cli_process(*run, env=env)
        assert again.returncode == 0, again.stderr
        assert sim.created == submitted and len(sim.lines()) == len(QUESTIONS) and sim.direct == []
        assert f"--batch-api: {MODEL}: 3 calls through {submitted} openai batch" in again.stderr
        assert "resumed, none submitted twice" in again.stderr

        store = RunStore(out)
        episodes = store.episodes()
        assert sorted(e.task_id for e in episodes) == ["q0", "q1", "q2"] and {e.status for e in episodes} == {"ok"}
        assert all(e.usage.cost_usd == pytest.approx(HALF) for e in episodes)  # the batch price
        for e in episodes:
            doc = store.transcript(e.task_id, e.system)
            assert doc is not None
            (reply,) = [ev.reply for ev in doc.events if isinstance(ev, ModelCallEvent)]
            assert reply is not None and reply["batch"] in sim.batches
        record = store.meta("batch")
        assert isinstance(record, dict) and record[MODEL]["batched"] == 3 and record[MODEL]["discount"] == 0.5
        assert all(isinstance(store.meta(BATCH_KEY + b), dict) for b in sim.batches)

        # the judge's calls: killed during their batch, resumed the same way
        sim.hold = True
        score = ["score", str(out), "--judge", MODEL, "--batch-api", "--json"]
        _killed(score, env, sim, 2 * len(QUESTIONS))
        before = sim.created
        sim.release()
        scored = run_cli_process(*score, env=env)
        assert scored.returncode == 0, scored.stderr
        assert sim.created == before and len(sim.lines()) == 2 * len(QUESTIONS) and sim.direct == []
        (report,) = json.loads(scored.stdout).values()
        assert report["accuracy"] == 1.0
        assert "resumed, none submitted twice" in scored.stderr
    judged = [line["body"] for line in sim.lines() if line["body"].get("tools")]
    assert len(judged) == 3 and all(b["tool_choice"]["function"]["name"] == "submit_judgment" for b in judged)
    store = RunStore(out)
    assert all(store.meta(REQUEST_KEY + line["custom_id"]) in sim.batches for line in sim.lines())


def _agent_turns(body: dict[str, Any], n: int) -> dict[str, Any]:
    """bm25-agent (the official openai_agent.py's protocol): search first, then the Answer JSON."""
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"kind": "message", "content": None,
                "calls": [{"name": "search_documents", "arguments": json.dumps({"query": "mountain car"})}]}
    return {"kind": "message", "content": json.dumps(ANSWER), "calls": []}


def test_an_agents_turns_are_gathered_across_episodes(operator_corpus: Corpus, tmp_path: Path) -> None:
    """Each turn of the episodes in flight goes out as one batch (Inspect's batch mode): three
    episodes of two turns make two batches of three, every call at the batch price."""
    out = tmp_path / "run"
    with SimOpenAIBatch(script=_agent_turns) as sim:
        env = {**_env(sim, tmp_path), "DESKBENCH_BATCH_WINDOW": "3"}  # ample for three episodes to ask
        proc = run_cli_process("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(operator_corpus.root),
                               "--agent", "bm25-agent", "--model", MODEL, "--out", str(out), "--batch-api", "--quiet",
                               env=env)
    assert proc.returncode == 0, proc.stderr
    sizes = [len(rows) for rows in _lines_by_batch(sim).values()]
    assert sizes == [3, 3] and sim.direct == [] and [r for r in sim.refused if r[0] != "BATCH"] == []
    store = RunStore(out)
    for e in store.episodes():
        assert (e.status, e.usage.calls, e.usage.cost_usd) == ("ok", 2, pytest.approx(2 * HALF)), (e.error, e.usage)
        doc = store.transcript(e.task_id, e.system)
        assert doc is not None
        batches = [ev.reply["batch"] for ev in doc.events if isinstance(ev, ModelCallEvent) and ev.reply]
        assert len(set(batches)) == 2  # one batch per turn


def _lines_by_batch(sim: SimOpenAIBatch) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for bid, batch in sim.batches.items():
        text = sim.blobs[batch["input_file_id"]].decode()
        out[bid] = [json.loads(x)["custom_id"] for x in text.splitlines() if x.strip()]
    return out
