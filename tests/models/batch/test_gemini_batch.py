"""The Gemini batch mode backend, under BatchedModel, against the strict simulator: the bodies are
GeminiNative's own (so sim_gemini_native's rules pass on them), each caller gets its own reply at
half the price with the model version the API returned, a batch too big to send inline goes as an
uploaded JSONL file whose keyed results are matched by key, what a batch did not answer (a
request's error, an expired, failed or cancelled batch) goes on its own at full price, and a
second process with the same journal polls the batch the first submitted instead of paying twice
(also across a kill -9, with the run store as the journal)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sim_gemini_batch import SimGeminiBatch

from deskbench.errors import UserError
from deskbench.models.batch import gemini
from deskbench.models.batch.base import BatchedModel, MemoryJournal, batch_provider, custom_id
from deskbench.models.batch.gemini import GeminiBatch, for_model, request_error
from deskbench.models.capabilities import capabilities
from deskbench.models.gemini_native import GeminiNative, to_gemini
from deskbench.models.prices import PriceTable
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.scripted import ScriptedChat
from deskbench.models.types import ChatRequest, ChatResponse, Message, ProviderRefused

MODEL = "gemini-2.5-flash"  # $0.30 / $2.50 per million tokens in the built-in table
FULL = (1000 * 0.30 + 200 * 2.50) / 1e6  # one call at the standard price
SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}


def _question(body: dict[str, Any]) -> str:
    return str(body["contents"][-1]["parts"][-1]["text"])


def _script(body: dict[str, Any], key: str) -> dict[str, Any]:
    """Echo the question; in a batch (key given), `fail:` questions get an error status."""
    text = _question(body)
    if key and text.startswith("fail:"):
        return {"kind": "status", "status": 500}
    return {"kind": "text", "text": f"answer to {text}", "input_tokens": 1000, "output_tokens": 200}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini-key")
    return monkeypatch


def _model(sim: SimGeminiBatch, env: pytest.MonkeyPatch, journal: MemoryJournal | None = None) -> BatchedModel:
    env.setenv("GOOGLE_GEMINI_BASE_URL", sim.base_url)
    chat = GeminiNative(MODEL, id=f"google/{MODEL}")
    direct = ResilientModel(chat, policy=RetryPolicy(attempts=1), prices=PriceTable())
    return BatchedModel(for_model(chat), direct, journal=journal or MemoryJournal(), window=0.05, poll=0.01)


def _ask(text: str, *, structured: bool = False) -> ChatRequest:
    return ChatRequest(messages=[Message(role="system", content="Be brief."), Message(role="user", content=text)],
                       response_schema=SCHEMA if structured else None, max_tokens=256)


async def _all(model: BatchedModel, requests: list[ChatRequest]) -> list[ChatResponse]:
    try:
        return list(await asyncio.gather(*(model.complete(r) for r in requests)))
    finally:
        await model.aclose()


def test_calls_gathered_into_one_inline_batch_at_half_price_each_with_its_own_reply(env: pytest.MonkeyPatch) -> None:
    with SimGeminiBatch(script=_script) as sim:
        model = _model(sim, env)
        asks = [_ask("q1"), _ask("q2"), _ask("is it right?", structured=True)]
        replies = asyncio.run(_all(model, asks))
    assert sim.created() == 1 and not sim.direct and not sim.uploads
    [batch] = sim.batches.values()
    # the bodies are GeminiNative's (to_gemini), each under its custom id as the metadata key
    sent = sim.creations[0]["batch"]["inputConfig"]["requests"]["requests"]
    caps = capabilities(f"google/{MODEL}")
    assert [s["request"] for s in sent] == [to_gemini(a, caps, f"google/{MODEL}") for a in asks]
    assert [s["metadata"]["key"] for s in sent] == [custom_id(f"google/{MODEL}", s["request"]) for s in sent]
    assert [r.message.text() for r in replies] == ["answer to q1", "answer to q2", "answer to is it right?"]
    assert {r.batch for r in replies} == {batch["name"]}
    assert all(r.model == MODEL for r in replies)  # the API's modelVersion, kept per reply
    assert [r.usage.cost_usd for r in replies] == pytest.approx([FULL / 2] * 3)
    assert model.ledger.total.cost_usd == pytest.approx(3 * FULL / 2)
    assert model.stats.as_dict() == {"batched": 3, "individual": 0, "batches": [batch["name"]], "resumed": []}


def test_a_request_the_batch_refused_goes_on_its_own_at_full_price(env: pytest.MonkeyPatch) -> None:
    with SimGeminiBatch(script=_script) as sim:
        model = _model(sim, env)
        ok, retried = asyncio.run(_all(model, [_ask("fine"), _ask("fail: once")]))
    assert sim.created() == 1 and len(sim.direct) == 1 and _question(sim.direct[0]) == "fail: once"
    assert ok.batch is not None and ok.usage.cost_usd == pytest.approx(FULL / 2)
    assert retried.batch is None and retried.message.text() == "answer to fail: once"
    assert retried.usage.cost_usd == pytest.approx(FULL)
    assert model.stats.batched == 1 and model.stats.individual == 1


def test_a_batch_over_the_inline_limit_goes_as_an_uploaded_file(env: pytest.MonkeyPatch) -> None:
    env.setattr(gemini, "INLINE_LIMIT", 200)  # three requests are more than this
    with SimGeminiBatch(script=_script) as sim:
        model = _model(sim, env)
        replies = asyncio.run(_all(model, [_ask("a"), _ask("b"), _ask("c")]))
        [upload] = [f for f in sim.files.values() if f["source"] == "UPLOADED"]
        lines = sim.blobs[upload["name"]].decode().splitlines()
    assert sim.creations[0]["batch"]["inputConfig"] == {"fileName": upload["name"]}
    assert upload["mimeType"] == "application/jsonl" and len(lines) == 3
    # the output file lists the answers last to first: matched by key, each caller gets its own
    assert [r.message.text() for r in replies] == ["answer to a", "answer to b", "answer to c"]
    assert all(r.usage.cost_usd == pytest.approx(FULL / 2) for r in replies) and not sim.direct


@pytest.mark.parametrize("ending", ["expired", "failed", "cancelled"])
def test_a_batch_that_gives_no_results_sends_its_requests_on_their_own(env: pytest.MonkeyPatch, ending: str) -> None:
    async def go(sim: SimGeminiBatch, model: BatchedModel) -> list[ChatResponse]:
        task = asyncio.ensure_future(asyncio.gather(model.complete(_ask("x")), model.complete(_ask("y"))))
        while not sim.created():
            await asyncio.sleep(0.01)
        if ending == "expired":
            sim.advance(48.5)
        elif ending == "failed":
            sim.fail_with = "the batch failed"
            sim.release()
        else:
            while not model.stats.batches:
                await asyncio.sleep(0.01)
            assert await model.cancel_open() == model.stats.batches
        try:
            return list(await task)
        finally:
            await model.aclose()

    with SimGeminiBatch(script=_script, hold=True) as sim:
        model = _model(sim, env)
        replies = asyncio.run(go(sim, model))
        [batch] = sim.batches.values()
    assert batch["state"] == f"BATCH_STATE_{ending.upper()}"
    assert sorted(_question(b) for b in sim.direct) == ["x", "y"]
    assert [r.message.text() for r in replies] == ["answer to x", "answer to y"]
    assert all(r.batch is None and r.usage.cost_usd == pytest.approx(FULL) for r in replies)
    assert model.stats.individual == 2 and model.stats.batched == 0


def test_a_second_process_resumes_the_submitted_batch_and_submits_nothing_twice(env: pytest.MonkeyPatch) -> None:
    journal = MemoryJournal()
    asks = [_ask("one"), _ask("two")]

    async def first(sim: SimGeminiBatch) -> None:
        model = _model(sim, env, journal)
        tasks = [asyncio.ensure_future(model.complete(a)) for a in asks]
        while not model.stats.batches:
            await asyncio.sleep(0.01)
        for task in tasks:  # the process dies while the batch runs
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await model.aclose()

    with SimGeminiBatch(script=_script, hold=True) as sim:
        asyncio.run(first(sim))
        assert sim.created() == 1
        sim.release()
        second = _model(sim, env, journal)
        replies = asyncio.run(_all(second, asks))
    assert sim.created() == 1 and not sim.direct
    [name] = sim.batches
    assert second.stats.resumed == [name] and second.stats.batched == 2
    assert [r.message.text() for r in replies] == ["answer to one", "answer to two"]
    assert all(r.batch == name and r.usage.cost_usd == pytest.approx(FULL / 2) for r in replies)


def test_a_journalled_batch_the_api_no_longer_knows_sends_its_requests_on_their_own(env: pytest.MonkeyPatch) -> None:
    journal = MemoryJournal()
    with SimGeminiBatch(script=_script) as sim:
        asyncio.run(_all(_model(sim, env, journal), [_ask("kept")]))
        [name] = sim.batches
        del sim.batches[name]  # deleted at the provider (DELETE batches/{id}) after the run recorded it
        again = _model(sim, env, journal)
        [reply] = asyncio.run(_all(again, [_ask("kept")]))
    assert again.stats.resumed == [name] and again.stats.individual == 1 and sim.created() == 1
    assert reply.batch is None and reply.message.text() == "answer to kept" and len(sim.direct) == 1


def test_a_refused_create_sends_each_request_on_its_own_where_a_user_refusal_stops_the_run(env: pytest.MonkeyPatch) -> None:
    with SimGeminiBatch(script=_script, models={"gemini-2.5-pro"}) as sim:  # the batch endpoint serves no flash
        model = _model(sim, env)
        with pytest.raises(ProviderRefused, match="not found for API version v1beta"):
            asyncio.run(_all(model, [_ask("q")]))  # on its own too: generateContent refuses the model, and the run stops
    assert sim.created() == 0 and sim.refused[0][2] == 404


def test_request_errors_read_as_generate_content_errors() -> None:
    overloaded = request_error({"code": 14, "message": "The model is overloaded."}, "google/m")
    assert overloaded.retryable and overloaded.status == 503 and not overloaded.fatal
    refused = request_error({"code": 3, "message": "The thinking budget (99999) is invalid."}, "google/m")
    assert not refused.retryable and refused.status == 400 and refused.fatal
    turn = request_error({"code": 3, "message": "Please ensure that the number of function response parts is "
                          "equal to the number of function call parts of the function call turn."}, "google/m")
    assert not turn.fatal  # a refusal of one conversation's turns is not the run's


def test_only_google_models_have_this_backend(env: pytest.MonkeyPatch) -> None:
    assert batch_provider("google/gemini-2.5-flash") == "google"
    with pytest.raises(UserError, match="use google/MODEL"):
        batch_provider("gemini/gemini-2.5-flash")
    with pytest.raises(TypeError):
        for_model(ScriptedChat.__new__(ScriptedChat))
    env.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
    chat = GeminiNative(MODEL)
    backend = GeminiBatch(chat)
    assert (backend.provider, backend.discount, backend.root) == ("google", 0.5, "http://127.0.0.1:9")
    env.delenv("GEMINI_API_KEY")
    with pytest.raises(UserError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiBatch(chat)


# -- a killed process and its resume, through the run store's journal ---------------------------
DRIVER = """
import asyncio, sys
from pathlib import Path
from deskbench.models.batch.base import BatchedModel
from deskbench.models.batch.gemini import for_model
from deskbench.models.gemini_native import GeminiNative
from deskbench.models.prices import PriceTable
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.types import ChatRequest, Message
from deskbench.runs.store import RunStore

async def main():
    chat = GeminiNative("gemini-2.5-flash", id="google/gemini-2.5-flash")
    direct = ResilientModel(chat, policy=RetryPolicy(attempts=1), prices=PriceTable())
    model = BatchedModel(for_model(chat), direct, journal=RunStore(Path(sys.argv[1])), window=0.05, poll=0.02)
    asks = [ChatRequest(messages=[Message(role="user", content=q)], max_tokens=256) for q in ("one", "two", "three")]
    try:
        replies = await asyncio.gather(*(model.complete(a) for a in asks))
    finally:
        await model.aclose()
    for r in replies:
        print(r.batch, r.usage.cost_usd, r.message.text())
    print("resumed", len(model.stats.resumed))

asyncio.run(main())
"""


def test_kill_9_during_a_batch_then_a_resume_that_submits_nothing_twice(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with SimGeminiBatch(script=_script, hold=True) as sim:
        environ = {**os.environ, **sim.env()}
        first = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "run")], env=environ,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # the process polls its batch only once the batch and its requests are in the run
            # store: kill it then (no sleeping on a guess)
            deadline = time.monotonic() + 60
            while (not sim.batches or not next(iter(sim.batches.values()))["polls"]) and first.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sim.created() == 1, first.stderr.read().decode() if first.poll() is not None else "no batch polled"
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        assert first.returncode == -signal.SIGKILL
        sim.release()
        second = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "run")], env=environ,
                                capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    [name] = sim.batches
    assert sim.created() == 1 and not sim.direct
    lines = second.stdout.splitlines()
    assert lines[-1] == "resumed 1"
    rows = [line.split(" ", 2) for line in lines[:-1]]
    assert [(b, text) for b, _, text in rows] == [(name, f"answer to {q}") for q in ("one", "two", "three")]
    assert [float(cost) for _, cost, _ in rows] == pytest.approx([FULL / 2] * 3)
