"""`run --batch-api` and `score --batch-api` with an anthropic/ model, end to end through the
Message Batches simulator (tests/sim_anthropic_batch.py): a `rag` run and a judge-graded `score`
whose model calls go through the Message Batches API at half the price, each call's batch in its
transcript and the run's meta, and a command killed (-9) while its batch runs that, run again,
polls the same batch and submits nothing twice (the issue's done-when, for Anthropic)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import batch_commands as shared
from conftest import run_cli_process
from sim_anthropic_batch import SimAnthropicBatch

from deskbench.corpus import Corpus

MODEL = "anthropic/claude-haiku-4-5"  # $1 / $5 per million tokens in the built-in table
FULL = (1000 * 1.0 + 200 * 5.0) / 1e6  # one call at the standard price


def _text(params: dict[str, Any]) -> str:
    out = []
    for m in params["messages"]:
        content = m["content"]
        out += [content] if isinstance(content, str) else [b.get("text", "") for b in content]
    return " ".join(out)


def _script(params: dict[str, Any], n: int) -> dict[str, Any]:
    """The judge (offered submit_judgment) finds every answer correct; rag answers by the question."""
    if "submit_judgment" in [t["name"] for t in params.get("tools", [])]:
        return {"kind": "tool", "name": "submit_judgment", "arguments": json.dumps(shared.VERDICT), **shared.USAGE}
    return {"kind": "text", "text": shared.rag_answer(_text(params)), **shared.USAGE}


def _env(sim: SimAnthropicBatch) -> dict[str, str]:
    return shared.batch_env(sim.env())


def _kill_once_batched(args: list[str], sim: SimAnthropicBatch, n: int) -> None:
    shared.kill_once_batched(args, _env(sim), lambda: len(sim.custom_ids()),
                      lambda: all(b.polls for b in list(sim.batches.values())), n)


def test_a_rag_run_through_message_batches_at_half_price(tmp_path: Path, operator_corpus: Corpus) -> None:
    with SimAnthropicBatch(script=_script) as sim:
        proc = run_cli_process(*shared.run_args(tmp_path, operator_corpus, MODEL), env=_env(sim))
    shared.check_batched_run(proc, tmp_path / "run", MODEL, set(sim.batches), FULL)
    assert not sim.direct.accepted and not sim.refused
    assert len(sim.custom_ids()) == 3 == len(set(sim.custom_ids()))
    assert all("max_tokens" in p and p["model"] == "claude-haiku-4-5" for p in sim.processed)


def test_a_killed_rag_run_resumes_its_batch_and_submits_nothing_twice(tmp_path: Path, operator_corpus: Corpus) -> None:
    args = shared.run_args(tmp_path, operator_corpus, MODEL)
    with SimAnthropicBatch(script=_script, hold=True) as sim:
        _kill_once_batched(args, sim, 3)
        made = sim.creations
        sim.release()
        proc = run_cli_process(*args, env=_env(sim))
    shared.check_resumed_run(proc, tmp_path / "run", made, FULL)
    assert sim.creations == made and not sim.direct.accepted  # the resumed run polled the batches it had submitted


def test_a_judge_graded_score_through_message_batches_killed_and_resumed(tmp_path: Path,
                                                                        operator_corpus: Corpus) -> None:
    with SimAnthropicBatch(script=_script) as sim:
        run = run_cli_process(*[a for a in shared.run_args(tmp_path, operator_corpus, MODEL) if a != "--batch-api"],
                              env=_env(sim))
        assert run.returncode == 0, run.stderr
        assert len(sim.direct.accepted) == 3 and not sim.creations  # the run itself did not batch
    score = ["score", str(tmp_path / "run"), "--judge", MODEL, "--batch-api", "--json"]
    with SimAnthropicBatch(script=_script, hold=True) as sim:
        _kill_once_batched(score, sim, 3)  # no answer is exact under ANLS*: three judge calls
        made = sim.creations
        sim.release()
        proc = run_cli_process(*score, env=_env(sim))
    shared.check_judged_score(proc, tmp_path / "run", MODEL, made)
    assert sim.creations == made and not sim.direct.accepted and not sim.refused
    judged = [p for p in sim.processed if p.get("tools")]
    assert len(judged) == 3 and all(p["tool_choice"] == {"type": "tool", "name": "submit_judgment"} for p in judged)
