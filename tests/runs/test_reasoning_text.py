"""A provider's reasoning ("thinking") text is part of the reply deskbench keeps (issue 20 item 1):
an OpenAI-compatible server's `reasoning_content` / `reasoning` reaches the run store's transcript
exactly, the episode viewer shows it (folded, escaped), the Inspect export carries it as
ContentReasoning; Anthropic's thinking and redacted_thinking blocks are read and sent back unchanged
(with their signature) in a tool-use loop, as the strict simulator requires when thinking is on."""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import write_operator_corpus
from fake_openai import FakeOpenAI
from fastapi.testclient import TestClient
from sim_anthropic import SimAnthropic

from deskbench.models.capabilities import capabilities
from deskbench.models.types import ChatRequest, Message, Reasoning, ToolSpec, Usage
from deskbench.runs.store import RunStore
from deskbench.runs.track import execute_run
from deskbench.runs.transcript import ModelCallEvent
from deskbench.tracks.docqa.run import RunSpec, prepare
from deskbench.tracks.docqa.tasks import DocQATask
from deskbench.web.store import WebStore
from deskbench.web.viewer import create_viewer_app

QUESTION = "Which vehicle rental rates are given for the winter season (quetzal-7)?"
TASK = DocQATask(id="q1", question=QUESTION, answer_variants=[["Mountain car"]],
                 evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
SYSTEM = "bm25-agent:openai/gpt-4.1"
# the server's reasoning, hostile on purpose: markup, a control-free but odd Unicode mix, newlines
THOUGHT_1 = "First search the tariffs.\n<script>alert('r1')</script> ñ✓ “winter” → page?"
THOUGHT_2 = "The winter tariff lists the Mountain car & nothing else <b>bold</b>."
ANSWER = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}


def _script(body: dict[str, Any], n: int) -> dict[str, Any]:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"kind": "tool", "name": "search_documents", "arguments": json.dumps({"query": "mountain car winter"}),
                "reasoning_content": THOUGHT_1, "reasoning_tokens": 11}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(ANSWER), "reasoning": THOUGHT_2}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("reasoning")
    corpus = write_operator_corpus(root)
    with FakeOpenAI(script=_script) as fake, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "sk-test")
        mp.setenv("OPENAI_BASE_URL", fake.base_url)
        spec = RunSpec(agent="bm25-agent", model="openai/gpt-4.1", out=root / "run", corpus=corpus.root, concurrency=1,
                       preset="paper")  # the Prompt 5 loop (provide_answer) the fake's replies are for
        execute_run(prepare(spec, [TASK]))
        sent = list(fake.requests)
    return {"root": root, "out": root / "run", "corpus": corpus.root, "sent": sent}


def test_the_store_keeps_the_exact_reasoning_and_never_sends_it_back(run: dict[str, Any]) -> None:
    store = RunStore(run["out"], create=False)
    doc = store.transcript("q1", SYSTEM)
    assert doc is not None
    calls = [e for e in doc.events if isinstance(e, ModelCallEvent)]
    assert len(calls) == 2
    first, second = (c.reply["message"] for c in calls if c.reply)
    assert first["reasoning"] == [{"text": THOUGHT_1}] and second["reasoning"] == [{"text": THOUGHT_2}]
    assert THOUGHT_1 not in json.dumps(first["content"])  # apart from the reply's text, not in it
    assert calls[0].reply is not None and calls[0].reply["usage"]["reasoning_tokens"] == 11
    # the second request carries the first reply as the assistant turn: the transcript keeps its
    # reasoning there too, but the wire never got it (DeepSeek refuses reasoning_content in a request)
    assert THOUGHT_1 not in json.dumps(run["sent"][1]) and "reasoning" not in json.dumps(run["sent"][1]["messages"])
    (turn,) = [m for m in doc.conversation(1) if m["role"] == "assistant"]
    assert turn["reasoning"] == [{"text": THOUGHT_1}]


def test_the_viewer_shows_the_reasoning_folded_and_escaped(run: dict[str, Any]) -> None:
    c = TestClient(create_viewer_app([run["out"]], run["corpus"]))
    token = WebStore(run["out"]).add_user("reader")
    page = c.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    assert c.post("/login", data={"csrf": csrf.group(1), "token": token}, follow_redirects=False).status_code == 303
    r = c.get("/episode", params={"run": "run", "system": SYSTEM, "task": "q1", "attempt": 0})
    assert r.status_code == 200, r.text[:300]
    body = r.text
    assert "<script>alert('r1')</script>" not in body and "<b>bold</b>" not in body  # escaped, never markup
    folded = re.findall(r'<details class="reasoning"><summary>(.*?)</summary>(.*?)</details>', body, re.S)
    shown = [html.unescape(re.sub(r"</?pre[^>]*>", "", inner)).strip() for _, inner in folded]
    assert THOUGHT_1 in shown and THOUGHT_2 in shown
    reply_2 = body.split("Reply")[2]  # the second call's reply section holds its own reasoning
    assert html.escape(THOUGHT_2, quote=False) in reply_2 or html.escape(THOUGHT_2) in reply_2


def test_the_inspect_export_carries_content_reasoning(run: dict[str, Any], tmp_path: Path) -> None:
    inspect_log = pytest.importorskip("inspect_ai.log")
    from inspect_ai.model import ChatMessageAssistant, ContentReasoning, ContentText
    from typer.testing import CliRunner

    from deskbench.cli import app

    result = CliRunner().invoke(app, ["export", str(run["out"]), "--format", "inspect", "-o", str(tmp_path / "x"),
                                      "--no-images"])
    assert result.exit_code == 0, result.output
    (path,) = sorted((tmp_path / "x").glob("*.eval"))
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert log.samples is not None
    (sample,) = log.samples
    replies = [m for m in sample.messages if isinstance(m, ChatMessageAssistant)]
    thoughts = [[p.reasoning for p in m.content if isinstance(p, ContentReasoning)] for m in replies
                if not isinstance(m.content, str)]
    assert thoughts == [[THOUGHT_1], [THOUGHT_2]]
    for m in replies:  # reasoning is never ordinary text
        assert not isinstance(m.content, str)
        assert all(THOUGHT_1 not in p.text and THOUGHT_2 not in p.text for p in m.content if isinstance(p, ContentText))
    model_events = [e for e in sample.events if e.event == "model"]
    out = model_events[0].output.choices[0].message
    assert [p.reasoning for p in out.content if isinstance(p, ContentReasoning)] == [THOUGHT_1]


def test_a_message_without_reasoning_keeps_its_cache_key_and_usage_its_shape() -> None:
    """The new fields are left out of a dump when empty: caches made before them still hit, and
    stored usage reads as before."""
    plain = ChatRequest(messages=[Message(role="user", content="hi"), Message(role="assistant", content="yo")])
    assert '"reasoning":' not in plain.model_dump_json()
    # the key as the request serialised before messages had a reasoning field
    before = {"messages": [{"role": r, "content": c, "tool_calls": [], "tool_call_id": None} for r, c in
                           (("user", "hi"), ("assistant", "yo"))],
              "tools": [], "tool_choice": None, "response_schema": None, "temperature": None, "top_p": None,
              "reasoning_effort": None, "max_tokens": None, "seed": None}
    payload = json.dumps(["m", before], sort_keys=True, separators=(",", ":"))
    assert plain.fingerprint("m") == hashlib.sha256(payload.encode()).hexdigest()
    withr = plain.model_copy(update={"messages": [plain.messages[0],
                                                  Message(role="assistant", content="yo", reasoning=[Reasoning(text="t")])]})
    assert withr.fingerprint("m") != plain.fingerprint("m")  # what is sent back (Anthropic) is part of the key
    assert "reasoning_tokens" not in Usage(calls=1).model_dump_json()
    assert (Usage(reasoning_tokens=2) + Usage(reasoning_tokens=3)).reasoning_tokens == 5


# --- Anthropic: thinking and redacted_thinking blocks ------------------------------------------------
CLAUDE = "claude-sonnet-4-5"
THINKING = "Look the tariff up first. <i>ñ✓</i>"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
SEARCH = ToolSpec(name="search_documents", description="Search.",
                  parameters={"type": "object", "properties": {"query": {"type": "string"}}})
THINK_ON = {"type": "enabled", "budget_tokens": 1024}


def _claude_loop(sim: SimAnthropic) -> tuple[ChatRequest, Message]:
    """A first call that thinks and calls a tool, and the request that continues after the tool."""
    from deskbench.models.anthropic_chat import AnthropicChat
    model = AnthropicChat(CLAUDE, base_url=sim.base_url, api_key="sk-ant-test")
    first = ChatRequest(messages=[Message(role="user", content="Which car in winter?")], tools=[SEARCH], tool_choice="auto")

    async def go() -> Any:
        try:
            return await model.complete(first)
        finally:
            await model.aclose()

    reply = asyncio.run(go()).message
    follow = first.model_copy(update={"messages": [*first.messages, reply,
                                                   Message(role="tool", tool_call_id=reply.tool_calls[0].id, content="p1")]})
    return follow, reply


def _post_with_thinking(sim: SimAnthropic, request: ChatRequest) -> Any:
    """The adapter's body for `request`, sent with extended thinking on (deskbench itself never
    turns it on): the strict simulator decides whether the thinking blocks came back as required."""
    import anthropic

    from deskbench.models.anthropic_chat import to_anthropic
    body = to_anthropic(request, capabilities(f"anthropic/{CLAUDE}"))
    client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)
    return client.messages.create(model=CLAUDE, **{**body, "thinking": THINK_ON})


def test_anthropic_thinking_blocks_are_read_and_sent_back_unchanged() -> None:
    from deskbench.models.anthropic_chat import AnthropicChat
    script = lambda b, n: ({"kind": "tool", "name": "search_documents", "arguments": '{"query": "winter"}',  # noqa: E731
                            "thinking": THINKING, "redacted_thinking": REDACTED} if n == 1 else {"kind": "text", "text": "ok"})
    with SimAnthropic(script=script) as sim:
        follow, reply = _claude_loop(sim)
        (signature,) = sim.issued_thinking
        assert reply.reasoning == [Reasoning(text=THINKING, signature=signature), Reasoning(redacted=REDACTED)]
        assert reply.text() == "" and reply.reasoning_text() == THINKING  # never ordinary text
        # deskbench's own continuation (thinking off) carries the blocks back first, as returned
        model = AnthropicChat(CLAUDE, base_url=sim.base_url, api_key="sk-ant-test")

        async def go() -> Any:
            try:
                return await model.complete(follow)
            finally:
                await model.aclose()

        asyncio.run(go())
        assert sim.refused == [], sim.refused[:1]
        turn = sim.accepted[-1]["messages"][1]
        assert turn["role"] == "assistant" and turn["content"][:2] == [
            {"type": "thinking", "thinking": THINKING, "signature": signature},
            {"type": "redacted_thinking", "data": REDACTED}]
        assert turn["content"][2]["type"] == "tool_use"
        # with thinking on, the same body is accepted: the tool-use loop kept its thinking
        assert _post_with_thinking(sim, follow).content[0].text == "ok"
        assert sim.refused == []


def test_the_simulator_refuses_a_tool_loop_that_drops_or_changes_thinking() -> None:
    """The strict double enforces the documented rules, so the test above can fail."""
    import anthropic
    script = lambda b, n: ({"kind": "tool", "name": "search_documents", "arguments": "{}", "thinking": THINKING}  # noqa: E731
                           if n == 1 else {"kind": "text", "text": "ok"})
    with SimAnthropic(script=script) as sim:
        follow, reply = _claude_loop(sim)
        dropped = follow.model_copy(update={"messages": [follow.messages[0], reply.model_copy(update={"reasoning": []}),
                                                         follow.messages[2]]})
        with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
            _post_with_thinking(sim, dropped)
        assert sim.refused[-1]["rule"] == "thinking_tool_loop_keeps_thinking"
        changed = [r.model_copy(update={"text": r.text + " (edited)"}) for r in reply.reasoning]
        edited = follow.model_copy(update={"messages": [follow.messages[0], reply.model_copy(update={"reasoning": changed}),
                                                        follow.messages[2]]})
        with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `thinking` block"):
            _post_with_thinking(sim, edited)
        assert sim.refused[-1]["rule"] == "thinking_blocks_unmodified"


def test_anthropic_thinking_alone_or_in_a_prefill_is_not_sent() -> None:
    """A turn of thinking alone (cut off while thinking) and a final (prefilled) assistant turn send
    no thinking: the API refuses both."""
    from deskbench.models.anthropic_chat import to_anthropic
    signed = [Reasoning(text="t", signature="sig")]
    caps = capabilities(f"anthropic/{CLAUDE}")
    body = to_anthropic(ChatRequest(messages=[Message(role="user", content="q"),
                                              Message(role="assistant", content="", reasoning=signed),
                                              Message(role="user", content="again")]), caps)
    assert [m["role"] for m in body["messages"]] == ["user"]  # the empty turn is dropped, its neighbours merged
    body = to_anthropic(ChatRequest(messages=[Message(role="user", content="q"),
                                              Message(role="assistant", content="The answer is", reasoning=signed)]), caps)
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "The answer is"}]
    # reasoning without a signature (another provider's) is never sent to Claude
    body = to_anthropic(ChatRequest(messages=[Message(role="user", content="q"),
                                              Message(role="assistant", content="a", reasoning=[Reasoning(text="x")]),
                                              Message(role="user", content="more")]), caps)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "a"}]


def test_the_transcript_keeps_the_signature_and_redacted_data() -> None:
    from deskbench.runs.transcript import message_json

    m = Message(role="assistant", content="x", reasoning=[Reasoning(text="why", signature="sig1"), Reasoning(redacted="ENC")])
    assert message_json(m, {})["reasoning"] == [{"text": "why", "signature": "sig1"}, {"text": "", "redacted": "ENC"}]
