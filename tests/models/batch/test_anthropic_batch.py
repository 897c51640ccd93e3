"""The Anthropic Message Batches backend, under BatchedModel, against the strict simulator: the
bodies are the chat client's own (so the simulator's Messages API rules pass on them), each
caller gets its own reply at half the price, a structured reply reads as the chat client reads
it, what a batch did not answer (errored, expired, cancelled) goes on its own at full price, and
a second process with the same journal polls the batch the first submitted instead of paying
twice."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sim_anthropic_batch import SimAnthropicBatch

from deskbench.models.anthropic_chat import AnthropicChat
from deskbench.models.batch.anthropic import AnthropicBatch, for_model
from deskbench.models.batch.base import BatchedModel, BatchItem, MemoryJournal
from deskbench.models.cache import ATTEMPT
from deskbench.models.prices import PriceTable
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.types import ChatRequest, ChatResponse, Message, ModelError

MODEL = "claude-haiku-4-5"  # $1 / $5 per million tokens in the built-in table
SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"]}


def _script(params: dict[str, Any], n: int) -> dict[str, Any]:
    """Echo the question; a forced `respond` call for a structured request; `fail:` / `expire:`
    questions fail or stay unprocessed in a batch (on their own they are answered)."""
    text = params["messages"][-1]["content"]
    text = text if isinstance(text, str) else text[-1]["text"]
    if params.get("tool_choice", {}).get("name") == "respond":
        return {"kind": "tool", "name": "respond", "arguments": json.dumps({"verdict": text}),
                "input_tokens": 1000, "output_tokens": 200}
    return {"kind": "text", "text": f"answer to {text}", "input_tokens": 1000, "output_tokens": 200}


def _batch_script(params: dict[str, Any], n: int) -> dict[str, Any]:
    text = params["messages"][-1]["content"]
    if isinstance(text, str) and text.startswith("fail:"):
        return {"kind": "status", "status": 529}
    if isinstance(text, str) and text.startswith("expire:"):
        return {"kind": "expire"}
    return _script(params, n)


def _sim(**kw: Any) -> SimAnthropicBatch:
    sim = SimAnthropicBatch(script=_batch_script, **kw)
    sim.direct.script = _script
    return sim


def _model(sim: SimAnthropicBatch, journal: MemoryJournal | None = None) -> BatchedModel:
    chat = AnthropicChat(MODEL, base_url=sim.base_url, api_key=sim.api_key)
    direct = ResilientModel(chat, policy=RetryPolicy(attempts=1), prices=PriceTable())
    return BatchedModel(for_model(chat), direct, journal=journal or MemoryJournal(), window=0.05, poll=0.01)


def _ask(text: str, *, structured: bool = False) -> ChatRequest:
    return ChatRequest(messages=[Message(role="system", content="Be brief."), Message(role="user", content=text)],
                       response_schema=SCHEMA if structured else None)


async def _all(model: BatchedModel, requests: list[ChatRequest]) -> list[ChatResponse]:
    try:
        return list(await asyncio.gather(*(model.complete(r) for r in requests)))
    finally:
        await model.aclose()


FULL = (1000 * 1.0 + 200 * 5.0) / 1e6  # one call at the standard price


def test_calls_gathered_into_one_batch_at_half_price_each_with_its_own_reply() -> None:
    with _sim() as sim:
        model = _model(sim)
        replies = asyncio.run(_all(model, [_ask("q1"), _ask("q2"), _ask("is it right?", structured=True)]))
    assert sim.creations == 1 and len(sim.processed) == 3 and not sim.direct.accepted
    assert [r.message.text() for r in replies[:2]] == ["answer to q1", "answer to q2"]
    assert json.loads(replies[2].message.text()) == {"verdict": "is it right?"}
    assert not replies[2].message.tool_calls  # the forced respond call is the text, as the chat client reads it
    batch_id = next(iter(sim.batches))
    assert {r.batch for r in replies} == {batch_id}
    assert all(r.usage.cost_usd == pytest.approx(FULL / 2) for r in replies)
    assert model.ledger.total.cost_usd == pytest.approx(3 * FULL / 2)
    assert model.stats.batched == 3 and model.stats.individual == 0
    assert not sim.refused and not sim.script_errors


def test_the_body_is_the_chat_clients_with_the_model() -> None:
    chat = AnthropicChat(MODEL, base_url="http://127.0.0.1:9", api_key="k")
    body = for_model(chat).body(_ask("hello"))
    assert body["model"] == MODEL and body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": "hello"}] and body["max_tokens"] > 0


def test_an_errored_request_is_sent_on_its_own_at_full_price() -> None:
    with _sim() as sim:
        model = _model(sim)
        replies = asyncio.run(_all(model, [_ask("q1"), _ask("fail: q2")]))
    assert sim.creations == 1 and len(sim.direct.accepted) == 1
    assert replies[1].message.text() == "answer to fail: q2" and replies[1].batch is None
    assert replies[1].usage.cost_usd == pytest.approx(FULL)
    assert replies[0].usage.cost_usd == pytest.approx(FULL / 2)
    assert model.stats.batched == 1 and model.stats.individual == 1


def test_an_expired_batch_gives_what_finished_and_the_rest_goes_on_its_own() -> None:
    with _sim() as sim:
        model = _model(sim)
        replies = asyncio.run(_all(model, [_ask("q1"), _ask("expire: q2")]))
    assert [r.batch is not None for r in replies] == [True, False]
    assert replies[1].message.text() == "answer to expire: q2"
    assert model.stats.individual == 1


def test_a_batch_past_its_24_hours_reads_as_expired() -> None:
    with _sim(hold=True) as sim:
        backend = for_model(AnthropicChat(MODEL, base_url=sim.base_url, api_key=sim.api_key))

        async def go() -> tuple[str, str, dict[str, ChatResponse | ModelError]]:
            bid = await backend.submit([_item("a", "q1")])
            running = (await backend.status(bid)).state
            sim.advance(25)
            status = await backend.status(bid)
            results = await backend.results(bid)
            await backend.aclose()
            return running, status.state, results

        running, state, results = asyncio.run(go())
    assert (running, state, results) == ("running", "expired", {})


def _item(cid: str, text: str) -> BatchItem:
    return BatchItem(cid, {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}]})


def test_cancel_open_cancels_and_the_callers_get_individual_replies() -> None:
    with _sim(hold=True) as sim:
        model = _model(sim)

        async def go() -> tuple[list[str], list[ChatResponse]]:
            tasks = [asyncio.create_task(model.complete(_ask(q))) for q in ("q1", "q2")]
            while not sim.batches:
                await asyncio.sleep(0.01)
            cancelled = await model.cancel_open()
            replies = list(await asyncio.gather(*tasks))
            await model.aclose()
            return cancelled, replies

        cancelled, replies = asyncio.run(go())
    assert cancelled == list(sim.batches)
    assert next(iter(sim.batches.values())).counts()["canceled"] == 2
    assert [r.message.text() for r in replies] == ["answer to q1", "answer to q2"]
    assert len(sim.direct.accepted) == 2 and all(r.batch is None for r in replies)


def test_a_second_process_polls_the_submitted_batch_instead_of_submitting_again() -> None:
    journal = MemoryJournal()
    requests = [_ask("q1"), _ask("verdict?", structured=True)]
    with _sim(hold=True) as sim:
        first = _model(sim, journal)

        async def killed() -> None:
            tasks = [asyncio.create_task(first.complete(r)) for r in requests]
            while not sim.batches:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # a few polls while the batch runs
            for t in tasks:
                t.cancel()
            await first.aclose()

        asyncio.run(killed())
        assert sim.creations == 1
        sim.release()
        second = _model(sim, journal)  # a new process: a new backend, the run store's journal
        replies = asyncio.run(_all(second, requests))
    assert sim.creations == 1 and not sim.direct.accepted
    assert second.stats.resumed == list(sim.batches)
    assert replies[0].message.text() == "answer to q1"
    assert json.loads(replies[1].message.text()) == {"verdict": "verdict?"}
    assert all(r.usage.cost_usd == pytest.approx(FULL / 2) for r in replies)


def test_another_attempt_is_another_request() -> None:
    with _sim() as sim:
        model = _model(sim)

        async def go() -> list[ChatResponse]:
            async def at(attempt: int) -> ChatResponse:
                ATTEMPT.set(attempt)
                return await model.complete(_ask("same", structured=True))

            try:
                return list(await asyncio.gather(at(0), at(1)))
            finally:
                await model.aclose()

        replies = asyncio.run(go())
    assert len(sim.processed) == 2
    assert all(json.loads(r.message.text()) == {"verdict": "same"} for r in replies)


def test_a_refused_batch_sends_every_request_on_its_own() -> None:
    with _sim() as sim:
        backend = AnthropicBatch(MODEL, AnthropicChat(MODEL, base_url=sim.base_url, api_key="k").caps,
                                 base_url=sim.base_url, api_key="sk-ant-wrong")

        async def go() -> ModelError:
            try:
                await backend.submit([_item("a", "q")])
            except ModelError as exc:
                return exc
            finally:
                await backend.aclose()
            raise AssertionError("a wrong key was accepted")

        error = asyncio.run(go())
    assert error.status == 401 and error.fatal and sim.creations == 0


def test_results_give_each_request_its_reply_or_the_error_the_messages_api_would_give() -> None:
    with _sim() as sim:
        backend = for_model(AnthropicChat(MODEL, base_url=sim.base_url, api_key=sim.api_key))
        too_long = BatchItem("b", {"model": MODEL, "max_tokens": 10**6, "messages": [{"role": "user", "content": "q"}]})

        async def go() -> tuple[str, dict[str, ChatResponse | ModelError]]:
            bid = await backend.submit([_item("a", "q1"), too_long, _item("c", "fail: q3"), _item("d", "expire: q")])
            state = (await backend.status(bid)).state
            results = await backend.results(bid)
            await backend.aclose()
            return state, results

        state, results = asyncio.run(go())
    assert state == "expired" and set(results) == {"a", "b", "c"}  # d was not processed
    reply, refused, overloaded = results["a"], results["b"], results["c"]
    assert isinstance(reply, ChatResponse) and reply.message.text() == "answer to q1" and reply.model == MODEL
    assert isinstance(refused, ModelError) and refused.status == 400 and not refused.retryable
    assert "maximum allowed number of output tokens" in str(refused)
    assert isinstance(overloaded, ModelError) and overloaded.status == 529 and overloaded.retryable
