"""`deskbench run --max-cost / --token-budget / --on-budget` end to end, against the strict OpenAI
simulator (tests/sim_openai.py): a run stops at its cost limit with one line (spent, episodes done,
how to resume) and resumes under a higher one; an episode stops at its token limit as a recorded
limit; a cost limit with a model that has no price is refused before any call.

Prices: the --prices file sets gpt-5-mini to $1000 per million input tokens and $0 per output
token, and the simulator's every reply counts 100 input and 20 output tokens: $0.10 a call."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import run_cli
from sim_openai import SimOpenAI

from deskbench.runs.budget import LIMITS_KEY
from deskbench.runs.store import RunStore

ANSWER = {"answer": ["2020"], "citations": []}
SYSTEM = "guess:openai/gpt-5-mini"


def _reply(body: dict[str, Any], n: int) -> dict[str, Any]:
    return {"kind": "text", "text": json.dumps(ANSWER)}


def _setup(tmp_path: Path, n: int = 5) -> tuple[Path, Path]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "question": f"Which year, {i}?", "answer_variants": ["2020"]})
                             + "\n" for i in range(n)))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-5-mini": [1000.0, 0.0]}))
    return tasks, prices


def deskbench(*args: str, sim: SimOpenAI, tmp_path: Path) -> Any:
    unset: dict[str, str | None] = {k: None for k in os.environ
                                    if k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "DESKBENCH_CAPABILITIES"))}
    env = {**unset, "OPENAI_BASE_URL": sim.base_url, "OPENAI_API_KEY": "sk-test",
           "DESKBENCH_CACHE_DIR": str(tmp_path / "cache")}
    return run_cli(*args, env=cast("dict[str, str]", env))


def test_a_run_stops_at_max_cost_in_one_line_and_resumes_under_a_higher_limit(tmp_path: Path) -> None:
    tasks, prices = _setup(tmp_path)
    out = tmp_path / "run"
    base = ["run", "--tasks", str(tasks), "--agent", "guess", "--model", "openai/gpt-5-mini", "--out", str(out),
            "--prices", str(prices), "--concurrency", "1", "--quiet"]
    with SimOpenAI(profile="openai", script=_reply) as sim:
        first = deskbench(*base, "--max-cost", "0.25", sim=sim, tmp_path=tmp_path)
        assert first.returncode == 0, first.stderr
        assert len(sim.accepted) == 3  # $0.10 an episode: the third starts at $0.20 and ends at $0.30
        line = [x for x in first.stderr.splitlines() if x.startswith("budget reached")]
        assert line == ["budget reached: spent $0.3000 of --max-cost $0.25 (run total $0.3000 (360 tokens)); 3 of 5 "
                        "episodes stored, 1 in flight finished, 2 not started; run the same command with a higher "
                        "--max-cost to resume"]
        assert len(RunStore(out).episodes()) == 3

        again = deskbench(*base, "--max-cost", "0.25", sim=sim, tmp_path=tmp_path)  # spent already: nothing starts
        assert again.returncode == 0, again.stderr
        assert len(sim.accepted) == 3 and "0 in flight finished, 2 not started" in again.stderr

        higher = deskbench(*base, "--max-cost", "1", sim=sim, tmp_path=tmp_path)
        assert higher.returncode == 0, higher.stderr
        assert len(sim.accepted) == 5 and "budget reached" not in higher.stderr
        done = deskbench(*base, "--max-cost", "0.1", sim=sim, tmp_path=tmp_path)  # complete: over it, but nothing left
        assert done.returncode == 0 and len(sim.accepted) == 5 and "budget reached" not in done.stderr
    assert sim.refused == []
    store = RunStore(out)
    assert sorted(e.task_id for e in store.episodes()) == ["t0", "t1", "t2", "t3", "t4"]
    assert all(e.status == "ok" for e in store.episodes())
    recorded = store.meta(LIMITS_KEY)  # each invocation's limits kept with the run, none in the system's identity
    assert isinstance(recorded, list) and [r["max_cost"] for r in recorded] == [0.25, 0.25, 1.0, 0.1]
    info = run_cli("info", str(out))  # what the run spent, and the limits it last ran under
    assert "spent $0.5000 (600 tokens); limits of its latest run: --max-cost 0.1" in info.stdout
    data = json.loads(run_cli("info", str(out), "--json").stdout)
    assert data["spent"] == {"cost_usd": 0.5, "tokens": 600} and len(data["limits"]) == 4


def test_an_episode_stops_at_its_token_limit_as_a_recorded_limit(tmp_path: Path) -> None:
    tasks, prices = _setup(tmp_path, n=2)
    out = tmp_path / "run"
    with SimOpenAI(profile="openai", script=_reply) as sim:
        proc = deskbench("run", "--tasks", str(tasks), "--agent", "guess", "--model", "openai/gpt-5-mini", "--out",
                         str(out), "--token-budget", "episode=100", "--quiet", "--json", sim=sim, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    episodes = RunStore(out).episodes()
    assert [e.status for e in episodes] == ["limit", "limit"]
    assert {e.error for e in episodes} == {"episode token limit reached: 120 tokens of --token-budget episode=100"}
    assert all(e.submission is None and e.usage.input_tokens == 100 for e in episodes)  # its one call kept
    (report,) = json.loads(proc.stdout).values()
    assert report["n"] == 2 and report["accuracy"] == 0.0  # docqa scores a limit without an answer as missing
    # exported for Inspect AI, it is a sample stopped at Inspect's own "token" limit, with its value
    inspect_log = pytest.importorskip("inspect_ai.log", reason="the inspect extra is not installed")
    exported = run_cli("export", str(out), "--format", "inspect", "-o", str(tmp_path / "logs"))
    assert exported.returncode == 0, exported.stderr
    (path,) = sorted((tmp_path / "logs").glob("*.eval"))
    log = inspect_log.read_eval_log(str(path))
    assert log.samples is not None and len(log.samples) == 2
    assert {(s.limit.type, s.limit.limit) for s in log.samples if s.limit} == {("token", 100.0)}


def test_a_cost_limit_with_an_unpriced_model_is_refused_before_any_call(tmp_path: Path) -> None:
    tasks, _ = _setup(tmp_path, n=1)
    with SimOpenAI(profile="openai", script=_reply) as sim:
        proc = deskbench("run", "--tasks", str(tasks), "--agent", "guess", "--model", "openai/gpt-3.5-turbo",
                         "--out", str(tmp_path / "run"), "--max-cost", "episode=0.5", "--quiet", sim=sim,
                         tmp_path=tmp_path)
        bad = deskbench("run", "--tasks", str(tasks), "--agent", "guess", "--out", str(tmp_path / "run2"),
                        "--max-cost", "five", "--quiet", sim=sim, tmp_path=tmp_path)
    assert proc.returncode == 2 and sim.accepted == []
    assert "--max-cost cannot be kept: openai/gpt-3.5-turbo has no price" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert bad.returncode == 2 and "--max-cost 'five' is not an amount of USD above 0" in bad.stderr
