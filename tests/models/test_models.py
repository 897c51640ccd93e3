"""Chat models: the OpenAI-compatible adapter on the wire, retries, limits, cache, usage and cost."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fake_openai import FakeOpenAI

from deskbench.errors import UserError
from deskbench.models.cache import ResponseCache
from deskbench.models.prices import PriceTable
from deskbench.models.registry import make_model
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.sdk_errors import retry_after_seconds
from deskbench.models.types import (
    ChatRequest,
    ImagePart,
    Message,
    ModelError,
    ProviderRefused,
    TextPart,
    ToolSpec,
)

if TYPE_CHECKING:
    from deskbench.models.openai_chat import OpenAIChat

ANSWER_TOOL = ToolSpec(
    name="provide_answer",
    description="Give the final answer.",
    parameters={"type": "object", "properties": {"answer": {"type": "array", "items": {"type": "string"}}},
                "required": ["answer"]},
)
FAST = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, timeout=300.0)  # timeouts are tested with their own policy: a slow machine must not retry


def ask(text: str = "hello", **kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)], **kw)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def sequence(model: Any, *requests: ChatRequest) -> list[Any]:
    """Several calls in one event loop, one after another (a client lives in one loop)."""
    return [await model.complete(r) for r in requests]


def compat(fake: FakeOpenAI, name: str = "fake-model") -> OpenAIChat:
    from deskbench.models.openai_chat import OpenAIChat
    return OpenAIChat(name, base_url=fake.base_url, api_key="sk-test-secret", id=f"openai-compat/{name}")


def test_text_tool_calls_images_and_forced_tools_on_the_wire() -> None:
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body.get("tools"):
            return {"kind": "tool", "name": "provide_answer", "arguments": '{"answer": ["42"]}'}
        return {"kind": "text", "text": "plain reply"}

    image = ImagePart.of(b"\x89PNG fake bytes", "image/png")
    request = ChatRequest(
        messages=[Message(role="user", content=[TextPart(text="see page"), image])],
        tools=[ANSWER_TOOL], tool_choice="provide_answer",
    )
    with FakeOpenAI(script=script) as fake:
        model = compat(fake)
        text_reply, tool_reply = run(sequence(model, ask(), request))
        assert text_reply.message.text() == "plain reply" and text_reply.usage.input_tokens == 100
        assert tool_reply.message.tool_calls[0].parsed() == {"answer": ["42"]}
        sent = fake.requests[1]
        assert sent["model"] == "fake-model"
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "provide_answer"}}
        parts = sent["messages"][0]["content"]
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert fake.headers[0]["authorization"] == "Bearer sk-test-secret"


def test_structured_output_request_shape() -> None:
    with FakeOpenAI(script=lambda b, n: {"kind": "text", "text": '{"verdict": "correct"}'}) as fake:
        schema = {"type": "object", "properties": {"verdict": {"enum": ["correct", "incorrect"]}}}
        run(compat(fake).complete(ask(response_schema=schema, temperature=0.0, seed=3)))
        sent = fake.requests[0]
        assert sent["response_format"]["json_schema"]["schema"] == schema
        assert sent["temperature"] == 0.0 and sent["seed"] == 3


def test_429_with_retry_after_is_honoured() -> None:
    script = lambda b, n: {"kind": "status", "status": 429, "retry_after": "0.3"} if n == 1 else {"kind": "text", "text": "ok"}  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        model = ResilientModel(compat(fake), policy=FAST)
        started = time.monotonic()
        reply = run(model.complete(ask()))
        assert reply.message.text() == "ok" and len(fake.requests) == 2
        assert time.monotonic() - started >= 0.3  # waited as long as the server asked
        assert model.ledger.retries == 1 and model.ledger.failures == 0


def test_5xx_is_retried_and_4xx_is_not() -> None:
    script = lambda b, n: {"kind": "status", "status": 500} if n <= 2 else {"kind": "text", "text": "ok"}  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        model = ResilientModel(compat(fake), policy=FAST)
        assert run(model.complete(ask())).message.text() == "ok"
        assert model.ledger.retries == 2
    with FakeOpenAI(script=lambda b, n: {"kind": "status", "status": 400, "message": "bad request"}) as fake:
        model = ResilientModel(compat(fake), policy=FAST)
        with pytest.raises(ProviderRefused, match="HTTP 400: bad request"):  # the user's to fix: stops the run
            run(model.complete(ask()))
        assert len(fake.requests) == 1
    too_long = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    with FakeOpenAI(script=lambda b, n: {"kind": "status", "status": 400, "message": too_long}) as fake:
        model = ResilientModel(compat(fake), policy=FAST)
        with pytest.raises(ModelError, match="maximum context length") as info:  # this episode's, not the run's
            run(model.complete(ask()))
        assert len(fake.requests) == 1 and not info.value.retryable


GARBAGE = [
    {"kind": "raw", "body": "<html><body>502 Bad Gateway</body></html>", "content_type": "text/html"},
    {"kind": "raw", "body": '{"choices": []}'},
    {"kind": "raw", "body": '{"choices": [{"message": "not an object"}]}'},
    {"kind": "raw", "body": '[1, 2, 3]'},
]


def test_garbage_200_bodies_are_retried_then_reported() -> None:
    script = lambda b, n: GARBAGE[n - 1] if n <= len(GARBAGE) else {"kind": "text", "text": "ok"}  # noqa: E731
    with FakeOpenAI(script=script) as fake:
        model = ResilientModel(compat(fake), policy=RetryPolicy(attempts=5, base_delay=0.01, max_delay=0.02))
        assert run(model.complete(ask())).message.text() == "ok"
        assert model.ledger.retries == len(GARBAGE)
    with FakeOpenAI(script=lambda b, n: GARBAGE[1]) as fake:
        model = ResilientModel(compat(fake), policy=FAST)
        with pytest.raises(ModelError, match="no choices.*after 4 attempts"):
            run(model.complete(ask()))


def test_tool_call_shapes_are_read_leniently() -> None:
    """Arguments given as an object (some servers do) are kept as JSON text; a custom
    (non-function) call and a call without a name are skipped, not fatal."""
    body = {"choices": [{"finish_reason": "tool_calls", "message": {"content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "provide_answer", "arguments": {"answer": ["x"]}}},
        {"id": "b", "type": "custom", "custom": {"name": "x", "input": "y"}},
        {"id": "c", "type": "function", "function": {"arguments": "{}"}},
    ]}}], "usage": {"prompt_tokens": 7, "completion_tokens": True}}
    with FakeOpenAI(script=lambda b, n: {"kind": "raw", "body": json.dumps(body)}) as fake:
        response = run(compat(fake).complete(ask()))
    assert [(c.id, c.name, c.parsed()) for c in response.message.tool_calls] == [("a", "provide_answer", {"answer": ["x"]})]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 0)
    assert response.message.content == "" and response.finish_reason == "tool_calls"


def test_timeouts_are_retried_then_reported() -> None:
    slow = {"kind": "slow", "seconds": 1.0}
    with FakeOpenAI(script=lambda b, n: slow) as fake:
        policy = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.01, timeout=0.2)
        model = ResilientModel(compat(fake), policy=policy)
        with pytest.raises(ModelError, match="timed out.*after 2 attempts"):
            run(model.complete(ask()))
        assert model.ledger.failures == 1


def test_api_key_never_appears_in_errors() -> None:
    with FakeOpenAI(script=lambda b, n: {"kind": "status", "status": 401, "message": "invalid key"}) as fake:
        model = ResilientModel(compat(fake), policy=FAST)
        with pytest.raises(ProviderRefused) as info:
            run(model.complete(ask()))
        assert "sk-test-secret" not in str(info.value) and "HTTP 401" in str(info.value)
        assert len(fake.requests) == 1  # never retried


def test_concurrency_limit_per_model() -> None:
    # Requests are answered three at a time (a barrier), so three are in flight at once however
    # the machine schedules them; a fourth would have to get past the limit to raise the peak.
    three = threading.Barrier(3, timeout=120)

    def script(b: dict[str, Any], n: int) -> dict[str, Any]:
        three.wait()
        return {"kind": "text", "text": "ok"}

    with FakeOpenAI(script=script) as fake:
        model = ResilientModel(compat(fake), policy=FAST, concurrency=3)

        async def many() -> None:
            await asyncio.gather(*(model.complete(ask(f"q{i}")) for i in range(12)))

        run(many())
        assert len(fake.requests) == 12 and fake.max_in_flight == 3


def test_cache_serves_repeats_without_a_call(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        cache = ResponseCache(tmp_path / "cache.sqlite")
        model = ResilientModel(compat(fake), policy=FAST, cache=cache)
        first, second, third = run(sequence(model, ask("same"), ask("same"), ask("different")))
        assert len(fake.requests) == 2 and len(cache) == 2
        assert not first.cached and second.cached and not third.cached
        assert second.message == first.message and second.usage.calls == 0
        assert model.ledger.cache_hits == 1
        # the cache is a file: a new process (here: a new object) sees it
        again = ResilientModel(compat(fake), policy=FAST, cache=ResponseCache(tmp_path / "cache.sqlite"))
        assert run(again.complete(ask("same"))).cached and len(fake.requests) == 2


def test_usage_and_cost_accounting(tmp_path: Path) -> None:
    prices_file = tmp_path / "prices.json"
    prices_file.write_text(json.dumps({"fake-model": [1.0, 2.0]}))
    prices = PriceTable.load(prices_file)
    with FakeOpenAI() as fake:
        model = ResilientModel(compat(fake), policy=FAST, prices=prices)
        reply, _ = run(sequence(model, ask(), ask("again")))
        # 100 input tokens at $1/M + 20 output tokens at $2/M
        assert reply.usage.cost_usd == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
        assert reply.usage.cost_known and reply.usage.seconds > 0
        assert model.ledger.total.calls == 2 and model.ledger.total.input_tokens == 200
        unpriced = ResilientModel(compat(fake, "mystery-model"), policy=FAST)
        usage = run(unpriced.complete(ask())).usage
        assert usage.cost_usd is None and not usage.cost_known  # unknown, never $0
        assert unpriced.ledger.total.cost_usd is None
    assert PriceTable().price("openai/gpt-5-mini-2025-08-07") == (0.25, 2.0)  # longest prefix wins
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(UserError, match="price file .* is unreadable"):
        PriceTable.load(bad)


def test_openai_adapter_honours_the_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        model = make_model("openai/anything")
        assert run(model.complete(ask())).message.text() == "ok"
        assert fake.requests[0]["model"] == "anything"
        assert fake.headers[0]["authorization"] == "Bearer sk-from-env"


def test_model_strings() -> None:
    with pytest.raises(UserError, match="unknown model provider 'cohere'"):  # mistral/ is a provider now
        make_model("cohere/command-a")
    with pytest.raises(UserError, match="openai-compat/<name>@<base url>"):
        make_model("openai-compat/qwen")
    model = make_model("openai-compat/qwen3@http://127.0.0.1:9/v1")
    assert model.id == "openai-compat/qwen3"


def test_retry_after_formats() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({}) is None
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 < (retry_after_seconds({"retry-after": future}) or 0) <= 31


def test_first_requests_need_no_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK works out its platform header on a client's first request in a worker thread;
    the adapter works it out once per process instead, so 64 episodes starting together do not
    make 64 thread hops before their first requests. The header on the wire is the same."""
    from openai._base_client import get_platform

    async def no_threads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a worker thread on the request path")

    with FakeOpenAI() as fake:
        model = compat(fake)
        monkeypatch.setattr(asyncio, "to_thread", no_threads)

        async def burst() -> None:
            await asyncio.gather(*(model.complete(ask(f"q{i}")) for i in range(8)))

        run(burst())
        assert len(fake.requests) == 8
        assert {h["x-stainless-os"] for h in fake.headers} == {str(get_platform())}


def test_calls_needing_new_connections_go_ahead_one_per_loop_turn() -> None:
    """Episodes that start together make their first calls in one turn of the event loop; the
    calls that need a new connection go ahead one per turn, so the first requests go on the wire
    while the others are still being built (not all after the last one). A call that can reuse a
    warm connection is never held, and a held call that is cancelled holds up no one."""
    from deskbench.models.openai_chat import _NewConnectionRamp

    async def go() -> None:
        loop = asyncio.get_running_loop()
        turn = [0]

        def tick() -> None:  # counts the loop's turns
            turn[0] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        await asyncio.sleep(0)
        ramp = _NewConnectionRamp()
        passed: list[tuple[int, int]] = []

        async def call(i: int) -> None:
            await ramp.turn()
            passed.append((i, turn[0]))
            ramp.in_flight += 1
            ramp.peak = max(ramp.peak, ramp.in_flight)
            await asyncio.sleep(0.05)  # the request in flight
            ramp.in_flight -= 1

        await asyncio.gather(*(call(i) for i in range(6)))
        assert [i for i, _ in passed] == list(range(6))  # in the order they came
        assert len({t for _, t in passed}) == 6  # one per turn
        assert ramp.peak == 6 and ramp.in_flight == 0

        # a warm pool: as many calls as have been in flight at once go ahead in the same turn
        passed.clear()
        await asyncio.gather(*(call(i) for i in range(6)))
        assert len({t for _, t in passed}) == 1

        # a held call that is cancelled (its call timed out) does not hold up those behind it
        passed.clear()
        ramp = _NewConnectionRamp()
        tasks = [asyncio.create_task(call(i)) for i in range(4)]
        await asyncio.sleep(0)
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert [i for i, _ in passed] == [0, 2, 3]

    run(go())
