"""What the batch backends' command tests share (tests/models/batch/test_*_batch_commands.py): three
docqa tasks over the operator corpus whose answers a simulator's script knows, the `run` that sends
them with --batch-api, an environment that polls fast, a command killed -9 once its requests are in
batches it has polled, and the checks of a run whose calls all went through batches. Each test
keeps its provider's own script (the wire shapes differ) and its simulator's own counters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from deskbench.corpus import Corpus
from deskbench.runs.store import RunStore

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
VERDICT = {"judgment": "correct", "main_issue": "none", "explanation": "the same item as the gold answer"}
USAGE = {"input_tokens": 1000, "output_tokens": 200}  # each scripted call's usage


def rag_answer(text: str) -> str:
    """rag's reply (its JSON answer with a citation) to the task whose question is in `text`."""
    word = next(w for w in ANSWERS if w in text)
    file, page = PAGES[word]
    return json.dumps({"answer": [ANSWERS[word]], "citations": [{"file": file, "page": page}]})


def batch_env(sim_env: dict[str, str]) -> dict[str, str]:
    """A simulator's environment, with batches gathered for 1 s and polled every 0.02 s."""
    return {**sim_env, "DESKBENCH_BATCH_POLL": "0.02", "DESKBENCH_BATCH_WINDOW": "1"}


def run_args(tmp_path: Path, corpus: Corpus, model: str) -> list[str]:
    """`deskbench run` of rag with `model` over TASKS into tmp_path/run, with --batch-api."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return ["run", "--tasks", str(tasks), "--corpus", str(corpus.root), "--agent", "rag", "--model", model,
            "--out", str(tmp_path / "run"), "--batch-api", "--json", "--quiet"]


def kill_once_batched(args: list[str], env: dict[str, str], batched: Callable[[], int], polled: Callable[[], bool],
                      n: int) -> None:
    """Start `deskbench ARGS`; once its `n` requests are in batches (`batched()` of them) it has
    polled (`polled()`: so they are in the run store), kill -9 it."""
    proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and not (batched() >= n and polled()):
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "the command ended"
        assert batched() == n
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def check_batched_run(proc: subprocess.CompletedProcess[str], run: Path, model: str, batches: set[str],
                      full: float) -> None:
    """A rag run over TASKS whose three calls all went through `batches`: the right answers, each
    at half of `full` (one call's standard price), each call's batch in its transcript, the run's
    batch record and its summary line."""
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout).values()
    assert report["n"] == 3 and report["n_errors"] == 0
    store = RunStore(run)
    episodes = store.episodes()
    assert sorted(e.submission.answer[0] for e in episodes if e.submission) == sorted(ANSWERS.values())
    assert all(e.usage.cost_usd == pytest.approx(full / 2) for e in episodes)  # one call each, at the batch price
    for e in episodes:
        doc = json.dumps(store.transcript(e.task_id, e.system).model_dump(mode="json"))
        assert any(f'"batch": "{n}"' in doc for n in batches)  # the call's batch in its transcript
    [record] = store.meta("batch").values()
    assert record["batched"] == 3 and record["individual"] == 0 and set(record["batches"]) == batches
    assert f"--batch-api: {model}: 3 calls through" in proc.stderr


def check_resumed_run(proc: subprocess.CompletedProcess[str], run: Path, made: int, full: float) -> None:
    """A rag run killed while its `made` batches ran, run again: every episode done at the batch
    price, through the batches it had submitted (all resumed)."""
    assert proc.returncode == 0, proc.stderr
    store = RunStore(run)
    episodes = store.episodes()
    assert len(episodes) == 3 and all(e.status == "ok" for e in episodes)
    assert all(e.usage.cost_usd == pytest.approx(full / 2) for e in episodes)
    [record] = store.meta("batch").values()
    assert len(record["resumed"]) == made and record["batched"] == 3


def check_judged_score(proc: subprocess.CompletedProcess[str], run: Path, model: str, made: int) -> None:
    """A judge-graded `score` of the rag run with `model`, killed and run again: the judge's
    verdicts (none of the answers is exact under ANLS*), its calls through the `made` batches the
    killed command had submitted."""
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)[f"rag:{model}"]
    assert result["accuracy_method"] == "judge" and result["judge"] == f"llm-judge/{model}"
    assert result["mean_anls"] == 0.0 and result["accuracy"] == pytest.approx(1.0)  # the judge's verdicts, not ANLS*
    [record] = RunStore(run).meta("batch").values()
    assert record["batched"] == 3 and len(record["resumed"]) == made
    assert "at 50% of the standard price" in proc.stderr and "resumed, none submitted twice" in proc.stderr
