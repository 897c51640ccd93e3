"""`run --batch-api` and `score --batch-api` with a google/ model, end to end through the Gemini
batch simulator (tests/sim_gemini_batch.py): a `rag` run and a judge-graded `score` whose model
calls go through Gemini batch mode at half the price, each call's batch in its transcript and the
run's meta, and a command killed (-9) while its batch runs that, run again, polls the same batch
and submits nothing twice (the issue's done-when, for Gemini)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import batch_commands as shared
from conftest import run_cli_process
from sim_gemini_batch import SimGeminiBatch

from deskbench.corpus import Corpus

MODEL = "google/gemini-2.5-flash"  # $0.30 / $2.50 per million tokens in the built-in table
FULL = (1000 * 0.30 + 200 * 2.50) / 1e6  # one call at the standard price


def _text(body: dict[str, Any]) -> str:
    return " ".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))


def _script(body: dict[str, Any], key: str) -> dict[str, Any]:
    """The judge (offered submit_judgment) finds every answer correct; rag answers by the question."""
    names = [d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]
    if "submit_judgment" in names:
        return {"kind": "calls", "calls": [{"name": "submit_judgment", "args": dict(shared.VERDICT)}], **shared.USAGE}
    return {"kind": "text", "text": shared.rag_answer(_text(body)), **shared.USAGE}


def _env(sim: SimGeminiBatch) -> dict[str, str]:
    return shared.batch_env(sim.env())


def _batched_keys(sim: SimGeminiBatch) -> list[str]:
    return [item.key for batch in sim.batches.values() for item in batch["items"]]


def _kill_once_batched(args: list[str], sim: SimGeminiBatch, n: int) -> None:
    shared.kill_once_batched(args, _env(sim), lambda: len(_batched_keys(sim)),
                      lambda: all(b["polls"] for b in sim.batches.values()), n)


def test_a_rag_run_through_gemini_batch_at_half_price(tmp_path: Path, operator_corpus: Corpus) -> None:
    with SimGeminiBatch(script=_script) as sim:
        proc = run_cli_process(*shared.run_args(tmp_path, operator_corpus, MODEL), env=_env(sim))
    shared.check_batched_run(proc, tmp_path / "run", MODEL, set(sim.batches), FULL)
    assert not sim.direct and len(_batched_keys(sim)) == 3 == len(set(_batched_keys(sim)))


def test_a_killed_rag_run_resumes_its_batch_and_submits_nothing_twice(tmp_path: Path, operator_corpus: Corpus) -> None:
    args = shared.run_args(tmp_path, operator_corpus, MODEL)
    with SimGeminiBatch(script=_script, hold=True) as sim:
        _kill_once_batched(args, sim, 3)
        made = sim.created()
        sim.release()
        proc = run_cli_process(*args, env=_env(sim))
    shared.check_resumed_run(proc, tmp_path / "run", made, FULL)
    assert sim.created() == made and not sim.direct  # the resumed run polled the batches it had submitted


def test_a_judge_graded_score_through_gemini_batch_killed_and_resumed(tmp_path: Path, operator_corpus: Corpus) -> None:
    with SimGeminiBatch(script=_script) as sim:
        run = run_cli_process(*[a for a in shared.run_args(tmp_path, operator_corpus, MODEL) if a != "--batch-api"],
                              env=_env(sim))
        assert run.returncode == 0, run.stderr
        assert len(sim.direct) == 3 and not sim.creations  # the run itself did not batch
    score = ["score", str(tmp_path / "run"), "--judge", MODEL, "--batch-api", "--json"]
    with SimGeminiBatch(script=_script, hold=True) as sim:
        _kill_once_batched(score, sim, 3)  # no answer is exact under ANLS*: three judge calls
        made = sim.created()
        sim.release()
        proc = run_cli_process(*score, env=_env(sim))
    shared.check_judged_score(proc, tmp_path / "run", MODEL, made)
    assert sim.created() == made and not sim.direct
