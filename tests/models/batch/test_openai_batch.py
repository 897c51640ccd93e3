"""BatchedModel with the OpenAI Batch backend, against the strict simulator (tests/sim_openai_batch.py):
replies at the batch price with their batch id, one line per distinct request, attempts apart, a
request the batch did not answer (refused, expired, cancelled, a failed batch) sent on its own at
the standard price, and a second process resuming the first one's batch from the journal.

Prices: gpt-4o-mini is $0.15 / $0.60 per million tokens (models/prices.py); every simulated reply
counts 100 input and 20 output tokens: $0.000027 a call, $0.0000135 in a batch."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sim_openai_batch import SimOpenAIBatch

from deskbench.errors import UserError
from deskbench.models.batch.base import (
    BATCH_KEY,
    REQUEST_KEY,
    BatchedModel,
    MemoryJournal,
    batch_mode,
    batch_provider,
    batched,
    custom_id,
)
from deskbench.models.cache import ATTEMPT
from deskbench.models.registry import open_model
from deskbench.models.types import ChatRequest, ChatResponse, Message

FULL = (100 * 0.15 + 20 * 0.60) / 1e6
HALF = FULL / 2


def _echo(body: dict[str, Any], n: int) -> dict[str, Any]:
    return {"kind": "text", "text": "re: " + body["messages"][-1]["content"]}


def ask(text: str) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)])


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimOpenAIBatch]:
    with SimOpenAIBatch(script=_echo) as s:
        for key, value in s.env().items():
            monkeypatch.setenv(key, value)
        yield s
    assert [r for r in s.refused if r[0] != "BATCH"] == []  # nothing the client sent was refused


def model(journal: MemoryJournal | None = None, **kw: Any) -> BatchedModel:
    return batched(open_model("openai/gpt-4o-mini"), journal or MemoryJournal(), window=kw.pop("window", 0.05),
                   poll=kw.pop("poll", 0.01))


def complete_all(m: BatchedModel, *texts: str) -> list[ChatResponse]:
    async def go() -> list[ChatResponse]:
        try:
            return list(await asyncio.gather(*(m.complete(ask(t)) for t in texts)))
        finally:
            await m.aclose()
    return asyncio.run(go())


def test_batched_replies_cost_the_batch_price_and_name_their_batch(sim: SimOpenAIBatch) -> None:
    m = model()
    replies = complete_all(m, "a", "b", "c")
    assert [r.message.content for r in replies] == ["re: a", "re: b", "re: c"]  # by custom id, not output order
    (batch_id,) = sim.batches
    assert {r.batch for r in replies} == {batch_id} and sim.created == 1 and sim.direct == []
    assert all(r.usage.cost_usd == pytest.approx(HALF) and r.usage.calls == 1 for r in replies)
    assert m.ledger.total.cost_usd == pytest.approx(3 * HALF) and m.ledger.total.calls == 3
    assert m.stats.batched == 3 and m.stats.individual == 0 and m.stats.batches == [batch_id]
    lines = sim.lines()  # the chat client's own body: model, messages, nothing else
    assert [line["body"] for line in lines] == [{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": t}]}
                                               for t in "abc"]
    assert all(line["url"] == "/v1/chat/completions" and line["method"] == "POST" for line in lines)
    assert m.summary() == ("openai/gpt-4o-mini: 3 calls through 1 openai batch at 50% of the standard price")


def test_the_same_request_twice_goes_once_and_another_attempt_apart(sim: SimOpenAIBatch) -> None:
    m = model()

    async def go() -> list[ChatResponse]:
        async def second_attempt() -> ChatResponse:
            ATTEMPT.set(1)  # the runner sets it in each episode's task
            return await m.complete(ask("a"))
        try:
            return list(await asyncio.gather(m.complete(ask("a")), m.complete(ask("a")), second_attempt()))
        finally:
            await m.aclose()

    first, same, other = asyncio.run(go())
    assert len(sim.lines()) == 2  # "a" once for attempt 0, once for attempt 1
    assert not first.cached and first.usage.cost_usd == pytest.approx(HALF)
    assert same.cached and same.usage.calls == 0 and same.message.content == "re: a"  # paid once
    assert not other.cached and other.usage.cost_usd == pytest.approx(HALF)
    assert m.ledger.total.calls == 2


def test_a_request_the_batch_refused_goes_on_its_own_at_the_standard_price(sim: SimOpenAIBatch) -> None:
    failed: set[str] = set()

    def flaky(body: dict[str, Any], n: int) -> dict[str, Any]:
        text = body["messages"][-1]["content"]
        if text == "b" and text not in failed:
            failed.add(text)
            return {"kind": "status", "status": 500}
        return _echo(body, n)

    sim.script = flaky
    m = model()
    a, b = complete_all(m, "a", "b")
    assert a.batch is not None and a.usage.cost_usd == pytest.approx(HALF)
    assert b.batch is None and b.message.content == "re: b" and b.usage.cost_usd == pytest.approx(FULL)
    assert [d["messages"][-1]["content"] for d in sim.direct] == ["b"]  # the synchronous API, once
    assert m.stats.individual == 1 and m.stats.batched == 1
    assert "1 not answered by a batch, sent on their own at the standard price" in m.summary()


def test_an_expired_batch_keeps_what_finished_and_sends_the_rest_on_its_own(sim: SimOpenAIBatch) -> None:
    sim.hold = True
    m = model()
    done = custom_id(m.id, m.backend.body(ask("a")))
    sim.complete = {done}

    async def go() -> list[ChatResponse]:
        tasks = [asyncio.create_task(m.complete(ask(t))) for t in ("a", "b")]
        while not any(b["status"] == "in_progress" for b in sim.batches.values()):
            await asyncio.sleep(0.01)
        sim.advance(25)  # past the 24 h window
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            await m.aclose()

    a, b = asyncio.run(go())
    (batch,) = sim.batches.values()
    assert batch["status"] == "expired" and batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    assert a.batch == batch["id"] and a.usage.cost_usd == pytest.approx(HALF)
    assert b.batch is None and b.usage.cost_usd == pytest.approx(FULL)
    assert [d["messages"][-1]["content"] for d in sim.direct] == ["b"]


def test_a_batch_refused_as_a_whole_sends_every_request_on_its_own(sim: SimOpenAIBatch) -> None:
    sim.max_requests = 1
    m = model()
    replies = complete_all(m, "a", "b")
    (batch,) = sim.batches.values()
    assert batch["status"] == "failed" and batch["errors"]["data"][0]["code"] == "too_many_requests"
    assert [r.batch for r in replies] == [None, None] and len(sim.direct) == 2
    assert all(r.usage.cost_usd == pytest.approx(FULL) for r in replies)


def test_a_second_process_resumes_the_batch_from_the_journal(sim: SimOpenAIBatch) -> None:
    sim.hold = True
    journal = MemoryJournal()
    first = model(journal)

    async def submit_then_die() -> None:
        tasks = [asyncio.create_task(first.complete(ask(t))) for t in ("a", "b")]
        while not any(k.startswith(REQUEST_KEY) and isinstance(v, str) for k, v in journal.values.items()):
            await asyncio.sleep(0.01)
        for task in tasks:
            task.cancel()  # the process is gone; its batch goes on at the provider
        await first.aclose()

    asyncio.run(submit_then_die())
    (batch_id,) = sim.batches
    assert journal.meta(BATCH_KEY + batch_id) == {"provider": "openai", "model": "openai/gpt-4o-mini",
                                                 "requests": 2, "state": "running"}
    sim.release()
    second = model(journal)
    replies = complete_all(second, "b", "a", "c")
    assert sim.created == 2  # "c" is new: a batch of its own; "a" and "b" from the first one
    assert [r.batch for r in replies[:2]] == [batch_id, batch_id] and replies[2].batch != batch_id
    assert len(sim.lines()) == 3 and sim.direct == []
    assert second.stats.resumed == [batch_id]
    assert (journal.meta(BATCH_KEY + batch_id) or {}) == {"provider": "openai", "model": "openai/gpt-4o-mini",
                                                          "requests": 2, "state": "ended"}


def test_cancelled_batches_send_their_requests_on_their_own(sim: SimOpenAIBatch) -> None:
    sim.hold = True
    m = model()

    async def go() -> tuple[list[str], list[ChatResponse]]:
        tasks = [asyncio.create_task(m.complete(ask(t))) for t in ("a", "b")]
        while not m.stats.batches:
            await asyncio.sleep(0.01)
        cancelled = await m.cancel_open()
        try:
            return cancelled, list(await asyncio.gather(*tasks))
        finally:
            await m.aclose()

    cancelled, replies = asyncio.run(go())
    assert cancelled == list(sim.batches) and sim.batches[cancelled[0]]["status"] == "cancelled"
    assert [r.batch for r in replies] == [None, None] and len(sim.direct) == 2


def test_custom_ids_fit_every_providers_rules() -> None:
    cid = custom_id("anthropic/claude-haiku-4-5", {"messages": [{"role": "user", "content": "é"}]}, 3)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", cid)
    assert cid != custom_id("anthropic/claude-haiku-4-5", {"messages": [{"role": "user", "content": "é"}]}, 0)
    assert cid == custom_id("anthropic/claude-haiku-4-5", json.loads(json.dumps(
        {"messages": [{"role": "user", "content": "é"}]})), 3)


@pytest.mark.parametrize(("model_id", "words"), [("gemini/gemini-2.5-flash", "use google/MODEL"),
                                                 ("mistral/pixtral-large-latest", "drop --batch-api"),
                                                 ("scripted/answers", "has no batch API")])
def test_a_model_without_a_batch_api_is_refused_in_one_line(model_id: str, words: str) -> None:
    with pytest.raises(UserError, match=re.escape(words)) as caught:
        batch_provider(model_id)
    assert "\n" not in str(caught.value)


class _Killed(BaseException):
    """The process dying at a chosen write (not an Exception: nothing catches it)."""


class DyingJournal(MemoryJournal):
    """A journal whose process dies when it is about to write `die_at` (a key prefix)."""

    def __init__(self, die_at: str) -> None:
        super().__init__()
        self.die_at = die_at

    def set_meta(self, key: str, value: object) -> None:
        if self.die_at and key.startswith(self.die_at):
            raise _Killed(key)
        super().set_meta(key, value)


def _die(m: BatchedModel, *texts: str) -> None:
    async def go() -> None:
        try:
            await asyncio.gather(*(m.complete(ask(t)) for t in texts))
        finally:
            await m.aclose()
    with pytest.raises(_Killed):
        asyncio.run(go())


def test_a_batch_created_just_before_the_process_died_is_found_by_its_key(sim: SimOpenAIBatch) -> None:
    journal = DyingJournal(die_at=BATCH_KEY)  # dies right after the provider created the batch
    _die(model(journal), "a", "b")
    (batch_id,) = sim.batches
    assert sim.batches[batch_id]["metadata"]["deskbench_key"]
    assert all(isinstance(v, dict) and "pending" in v for k, v in journal.values.items() if k.startswith(REQUEST_KEY))
    journal.die_at = ""
    again = model(journal)
    replies = complete_all(again, "a", "b")
    assert sim.created == 1 and [r.batch for r in replies] == [batch_id, batch_id] and sim.direct == []
    assert again.stats.resumed == [batch_id] and journal.meta(REQUEST_KEY + custom_id(
        again.id, again.backend.body(ask("a")))) == batch_id


def test_requests_marked_but_never_submitted_are_submitted_once(sim: SimOpenAIBatch,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    async def killed_during_the_upload(*args: Any, **kwargs: Any) -> Any:
        raise _Killed("during the upload")

    journal = MemoryJournal()
    first = model(journal)
    monkeypatch.setattr(first.backend, "submit", killed_during_the_upload)
    _die(first, "a")
    assert sim.created == 0 and [v for v in journal.values.values() if isinstance(v, dict)]  # marked "pending"
    replies = complete_all(model(journal), "a")  # not found at the provider: submitted now, once
    assert sim.created == 1 and replies[0].batch in sim.batches and sim.direct == []


def test_the_batch_mode_wraps_the_models_opened_in_it_and_cancels_their_batches(sim: SimOpenAIBatch) -> None:
    sim.hold = True
    with batch_mode(MemoryJournal(), ("judge",), window=0.05, poll=0.01) as mode:
        agent = open_model("openai/gpt-4o-mini")  # role "agent": not batched in this mode
        judge = open_model("openai/gpt-4o-mini", role="judge")
        assert not isinstance(agent, BatchedModel) and isinstance(judge, BatchedModel) and mode.models == [judge]

        async def go() -> ChatResponse:
            call = asyncio.create_task(judge.complete(ask("a")))
            while not judge.stats.batches:
                await asyncio.sleep(0.01)
            mode.cancel_open()  # --on-budget cancel: sync, from the event loop
            try:
                return await call
            finally:
                await judge.aclose()

        reply = asyncio.run(go())
    assert open_model("openai/gpt-4o-mini", role="judge").__class__.__name__ == "ResilientModel"  # mode over
    (batch,) = sim.batches.values()
    assert batch["status"] == "cancelled" and reply.batch is None and len(sim.direct) == 1
    assert mode.record() == {"openai/gpt-4o-mini": {"provider": "openai", "discount": 0.5, "batched": 0,
                                                    "individual": 1, "batches": [batch["id"]], "resumed": []}}
