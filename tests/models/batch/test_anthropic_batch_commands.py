"""`run --batch-api` and `score --batch-api` with an anthropic/ model, end to end through the
Message Batches simulator (tests/sim_anthropic_batch.py): a `rag` run and a judge-graded `score`
whose model calls go through the Message Batches API at half the price, each call's batch in its
transcript and the run's meta, and a command killed (-9) while its batch runs that, run again,
polls the same batch and submits nothing twice (the issue's done-when, for Anthropic)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli_process
from sim_anthropic_batch import SimAnthropicBatch

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore

MODEL = "anthropic/claude-haiku-4-5"  # $1 / $5 per million tokens in the built-in table
FULL = (1000 * 1.0 + 200 * 5.0) / 1e6  # one call at the standard price
ANSWERS = {"winter": "Mountain car", "overnight": "a fee", "helicopter": "Bell 407"}
PAGES = {"winter": ("alpha.pdf", 1), "overnight": ("alpha.pdf", 2), "helicopter": ("beta.pdf", 2)}
TASKS = [
    {"id": "a", "question": "Which vehicle rental rates are given for the winter season?",
     "answer_variants": [["the Mountain car rental rates"]], "evidence": [{"document": "alpha.pdf", "page": 1}]},
    {"id": "b", "question": "What do cars parked overnight pay?", "answer_variants": [["an overnight parking fee"]],
     "evidence": [{"document": "alpha.pdf", "page": 2}]},
    {"id": "c", "question": "Which helicopter accessories catalogue is listed?",
     "answer_variants": [["the Bell 407 catalogue"]], "evidence": [{"document": "beta.pdf", "page": 2}]},
]


def _text(params: dict[str, Any]) -> str:
    out = []
    for m in params["messages"]:
        content = m["content"]
        out += [content] if isinstance(content, str) else [b.get("text", "") for b in content]
    return " ".join(out)


def _script(params: dict[str, Any], n: int) -> dict[str, Any]:
    """The judge (offered submit_judgment) finds every answer correct; rag answers by the question."""
    usage = {"input_tokens": 1000, "output_tokens": 200}
    if "submit_judgment" in [t["name"] for t in params.get("tools", [])]:
        verdict = {"judgment": "correct", "main_issue": "none", "explanation": "the same item as the gold answer"}
        return {"kind": "tool", "name": "submit_judgment", "arguments": json.dumps(verdict), **usage}
    word = next(w for w in ANSWERS if w in _text(params))
    page = PAGES[word]
    answer = {"answer": [ANSWERS[word]], "citations": [{"file": page[0], "page": page[1]}]}
    return {"kind": "text", "text": json.dumps(answer), **usage}


def _env(sim: SimAnthropicBatch) -> dict[str, str]:
    return {**sim.env(), "DESKBENCH_BATCH_POLL": "0.02", "DESKBENCH_BATCH_WINDOW": "1"}


def _run_args(tmp_path: Path, corpus: Corpus) -> list[str]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return ["run", "--tasks", str(tasks), "--corpus", str(corpus.root), "--agent", "rag", "--model", MODEL,
            "--out", str(tmp_path / "run"), "--batch-api", "--json", "--quiet"]


def _kill_once_batched(args: list[str], sim: SimAnthropicBatch, n: int) -> None:
    """Start `deskbench ARGS`; once its `n` requests are in batches it has polled (so they are in
    the run store), kill -9 it."""
    proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args], env={**os.environ, **_env(sim)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and not (
                len(sim.custom_ids()) >= n and all(b.polls for b in list(sim.batches.values()))):
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "the command ended"
        assert len(sim.custom_ids()) == n
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_a_rag_run_through_message_batches_at_half_price(tmp_path: Path, operator_corpus: Corpus) -> None:
    with SimAnthropicBatch(script=_script) as sim:
        proc = run_cli_process(*_run_args(tmp_path, operator_corpus), env=_env(sim))
    assert proc.returncode == 0, proc.stderr
    assert not sim.direct.accepted and not sim.refused
    assert len(sim.custom_ids()) == 3 == len(set(sim.custom_ids()))
    assert all("max_tokens" in p and p["model"] == "claude-haiku-4-5" for p in sim.processed)
    (report,) = json.loads(proc.stdout).values()
    assert report["n"] == 3 and report["n_errors"] == 0
    store = RunStore(tmp_path / "run")
    episodes = store.episodes()
    assert sorted(e.submission.answer[0] for e in episodes if e.submission) == sorted(ANSWERS.values())
    assert all(e.usage.cost_usd == pytest.approx(FULL / 2) for e in episodes)  # one call each, at the batch price
    names = set(sim.batches)
    for e in episodes:
        doc = json.dumps(store.transcript(e.task_id, e.system).model_dump(mode="json"))
        assert any(f'"batch": "{n}"' in doc for n in names)  # the call's batch in its transcript
    [record] = store.meta("batch").values()
    assert record["batched"] == 3 and record["individual"] == 0 and set(record["batches"]) == names
    assert f"--batch-api: {MODEL}: 3 calls through" in proc.stderr


def test_a_killed_rag_run_resumes_its_batch_and_submits_nothing_twice(tmp_path: Path, operator_corpus: Corpus) -> None:
    args = _run_args(tmp_path, operator_corpus)
    with SimAnthropicBatch(script=_script, hold=True) as sim:
        _kill_once_batched(args, sim, 3)
        made = sim.creations
        sim.release()
        proc = run_cli_process(*args, env=_env(sim))
    assert proc.returncode == 0, proc.stderr
    assert sim.creations == made and not sim.direct.accepted  # the resumed run polled the batches it had submitted
    episodes = RunStore(tmp_path / "run").episodes()
    assert len(episodes) == 3 and all(e.status == "ok" for e in episodes)
    assert all(e.usage.cost_usd == pytest.approx(FULL / 2) for e in episodes)
    [record] = RunStore(tmp_path / "run").meta("batch").values()
    assert len(record["resumed"]) == made and record["batched"] == 3


def test_a_judge_graded_score_through_message_batches_killed_and_resumed(tmp_path: Path,
                                                                        operator_corpus: Corpus) -> None:
    with SimAnthropicBatch(script=_script) as sim:
        run = run_cli_process(*[a for a in _run_args(tmp_path, operator_corpus) if a != "--batch-api"], env=_env(sim))
        assert run.returncode == 0, run.stderr
        assert len(sim.direct.accepted) == 3 and not sim.creations  # the run itself did not batch
    score = ["score", str(tmp_path / "run"), "--judge", MODEL, "--batch-api", "--json"]
    with SimAnthropicBatch(script=_script, hold=True) as sim:
        _kill_once_batched(score, sim, 3)  # no answer is exact under ANLS*: three judge calls
        made = sim.creations
        sim.release()
        proc = run_cli_process(*score, env=_env(sim))
    assert proc.returncode == 0, proc.stderr
    assert sim.creations == made and not sim.direct.accepted and not sim.refused
    judged = [p for p in sim.processed if p.get("tools")]
    assert len(judged) == 3 and all(p["tool_choice"] == {"type": "tool", "name": "submit_judgment"} for p in judged)
    result = json.loads(proc.stdout)[f"rag:{MODEL}"]
    assert result["accuracy_method"] == "judge" and result["judge"] == f"llm-judge/{MODEL}"
    assert result["mean_anls"] == 0.0 and result["accuracy"] == pytest.approx(1.0)  # the judge's verdicts, not ANLS*
    [record] = RunStore(tmp_path / "run").meta("batch").values()
    assert record["batched"] == 3 and len(record["resumed"]) == made
    assert "at 50% of the standard price" in proc.stderr and "resumed, none submitted twice" in proc.stderr
