"""The chat-completions POST without the SDK's per-call layers (models/openai_wire.py) sends what
the SDK sends and reads every reply and refusal as the SDK path does: each case runs both ways
against the same local server and must come out the same."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fake_openai import FakeOpenAI

from deskbench.models.openai_wire import direct_post
from deskbench.models.types import ChatRequest, Message, ModelError, Reasoning, TextPart, ToolSpec

REQUEST = ChatRequest(
    messages=[Message(role="system", content="Answer briefly. ñ✓"),
              Message(role="user", content=[TextPart(text="label"), TextPart(text="page text € 1", ref="pagetext:a.pdf#1")])],
    tools=[ToolSpec(name="search_documents", description="Search.", parameters={"type": "object", "properties": {}})],
    tool_choice="auto", temperature=0.0, max_tokens=50,
)
CASES: dict[str, dict[str, Any]] = {
    "text": {"kind": "text", "text": "the answer ñ✓"},
    "tool": {"kind": "tool", "name": "search_documents", "arguments": '{"query": "x\\u0001"}'},
    "rate limited": {"kind": "status", "status": 429, "retry_after": "0.5", "message": "slow down"},
    "server error": {"kind": "status", "status": 500},
    "context overflow": {"kind": "status", "status": 400, "message": "maximum context length is 8192 tokens"},
    "bad key": {"kind": "status", "status": 401, "message": "Incorrect API key provided"},
    "html page": {"kind": "raw", "body": "<html>proxy</html>", "content_type": "text/html"},
    "html error": {"kind": "raw", "status": 502, "body": "<html>bad gateway</html>", "content_type": "text/html"},
    "wrong shape": {"kind": "raw", "body": json.dumps({"choices": []})},
    "too slow": {"kind": "slow", "seconds": 3600.0},  # past any timeout: never answers in time
    "reasoning_content": {"kind": "text", "text": "42", "reasoning_content": "6 × 7 ñ✓\nso 42", "reasoning_tokens": 9},
    "reasoning": {"kind": "tool", "name": "search_documents", "arguments": "{}", "reasoning": "search first"},
}
REPLIES = ("text", "tool", "reasoning_content", "reasoning")
# headers either transport adds on its own (aiohttp under the SDK, or directly) and may order or
# word differently; everything the SDK decides (auth, user agent, stainless headers) must match
TRANSPORT = {"host", "content-length", "accept-encoding", "connection"}


def _outcome(behaviour: dict[str, Any], direct: bool) -> tuple[object, dict[str, Any], dict[str, str]]:
    with FakeOpenAI(script=lambda body, n: behaviour) as fake:
        return _run(fake, direct)


def _run(fake: FakeOpenAI, direct: bool) -> tuple[object, dict[str, Any], dict[str, str]]:
    from deskbench.models.openai_chat import OpenAIChat
    async def go() -> object:
        # 5 s, not 0.4 s: every other case must answer within it on a loaded machine too
        model = OpenAIChat("gpt-4.1", base_url=fake.base_url, api_key="sk-test", timeout=5.0)
        assert (model._direct is not None) is True  # the client deskbench builds is in the plain configuration
        if not direct:
            model._direct = None
        try:
            response = await model.complete(REQUEST)
            return response.model_dump()
        except ModelError as exc:
            return ("error", str(exc), exc.retryable, exc.status, exc.retry_after, exc.fatal, exc.param)
        finally:
            await model.aclose()

    outcome = asyncio.run(go())
    headers = {k.lower(): v for k, v in fake.headers[-1].items() if k.lower() not in TRANSPORT}
    return outcome, fake.requests[-1], headers


@pytest.mark.parametrize("case", list(CASES))
def test_the_direct_post_sends_and_reads_as_the_sdk_does(case: str) -> None:
    via_sdk = _outcome(CASES[case], direct=False)
    direct = _outcome(CASES[case], direct=True)
    assert direct[0] == via_sdk[0]
    assert direct[1] == via_sdk[1]  # the request body, as the server parsed it
    assert direct[2] == via_sdk[2]  # the headers the SDK decides
    assert direct[2]["authorization"] == "Bearer sk-test" and "user-agent" in direct[2]
    if case in REPLIES:
        assert not isinstance(direct[0], tuple)
    else:
        assert isinstance(direct[0], tuple) and direct[0][0] == "error"


def test_a_client_the_sdk_must_handle_itself_keeps_the_sdk_path() -> None:
    from openai import AsyncOpenAI
    plain = AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    with_query = AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1", default_query={"api-version": "1"})
    assert direct_post(plain, "/chat/completions", 1.0) is not None
    assert direct_post(with_query, "/chat/completions", 1.0) is None


def test_a_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY is honoured as the SDK's client honours it (looked up once, not per request)."""
    from deskbench.models.openai_chat import OpenAIChat
    with FakeOpenAI(script=lambda body, n: CASES["text"]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)

        async def go() -> str:
            model = OpenAIChat("gpt-4.1", base_url="http://models.invalid/v1", api_key="sk-test", timeout=2)
            assert model._direct is not None and model._direct.proxy is not None
            try:
                return (await model.complete(REQUEST)).message.text()
            finally:
                await model.aclose()

        assert asyncio.run(go()) == "the answer ñ✓"
        assert proxy.headers[-1].get("Host", proxy.headers[-1].get("host")) == "models.invalid"


def test_a_body_with_messages_encoded_once_is_the_sdk_encoding_byte_for_byte() -> None:
    from deskbench.models.capabilities import capabilities
    from deskbench.models.openai_chat import options_kwargs, request_kwargs, to_openai_messages
    from deskbench.models.openai_wire import WireMessages, dumps

    caps = capabilities("openai/gpt-4.1")
    wire = WireMessages(lambda m: to_openai_messages([m])[0], chars=200)
    messages = list(REQUEST.messages)
    for step in range(4):  # a growing conversation: earlier messages come from the cache
        request = REQUEST.model_copy(update={"messages": messages})
        sent = wire.body("gpt-4.1", messages, options_kwargs(request, caps))
        assert sent == dumps({"model": "gpt-4.1", **request_kwargs(request, caps)}).encode()
        messages = [*messages, Message(role="assistant", content=f"step {step} ✓" * 20)]
    assert wire._chars <= 200  # the budget holds
    assert wire.body("m", messages[:1], {}) == dumps({"model": "m", "messages": to_openai_messages(messages[:1])}).encode()


def test_reasoning_is_read_the_same_both_ways_and_never_sent_back() -> None:
    """DeepSeek refuses a request carrying reasoning_content: an assistant turn's reasoning stays out
    of the body on both paths, and the reply's reasoning is read into the message, not its text."""
    from deskbench.models.openai_chat import OpenAIChat
    earlier = Message(role="assistant", content="before", reasoning=[Reasoning(text="old thoughts")])
    request = REQUEST.model_copy(update={"messages": [*REQUEST.messages, earlier, Message(role="user", content="more")]})
    behaviour = {"kind": "text", "text": "42", "reasoning_content": "a", "reasoning": "b", "reasoning_tokens": 3}
    outcomes = []
    for direct in (False, True):
        with FakeOpenAI(script=lambda body, n: behaviour) as fake:
            async def go(fake: FakeOpenAI = fake, direct: bool = direct) -> Any:
                model = OpenAIChat("gpt-4.1", base_url=fake.base_url, api_key="sk-test")
                if not direct:
                    model._direct = None
                try:
                    return await model.complete(request)
                finally:
                    await model.aclose()

            response = asyncio.run(go())
            sent = fake.requests[-1]
        assert sent["messages"][-2] == {"role": "assistant", "content": "before"}
        assert "old thoughts" not in json.dumps(sent)
        outcomes.append(response.model_dump())
        assert response.message.content == "42" and response.reasoning == "a\n\nb"
        assert [r.text for r in response.message.reasoning] == ["a", "b"] and response.usage.reasoning_tokens == 3
    assert outcomes[0] == outcomes[1]
