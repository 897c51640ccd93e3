"""Mistral as a provider (`mistral/MODEL`, key MISTRAL_API_KEY), held to its documented API by the
strict simulator in tests/sim_mistral.py: a bm25-agent run end to end, the fields Mistral names
differently (random_seed), the role order it enforces after tool results, its image limit, its
error bodies (422 validation lists, 400 order errors, 401, 429) turned into one-line refusals.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from sim_mistral import SimMistral, completion

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.models.capabilities import capabilities, use_capabilities
from deskbench.models.message_order import BRIDGE, tool_results_first
from deskbench.models.prices import PriceTable
from deskbench.models.registry import make_model, parse_spec, preflight
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.types import (
    ChatRequest,
    ImagePart,
    Message,
    ModelError,
    ProviderRefused,
    TextPart,
    ToolCall,
    ToolSpec,
)
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.tasks import DocQATask

FAST = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, timeout=300.0)
SEARCH = ToolSpec(name="search_documents", description="Search the documents.",
                  parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
ANSWER = ToolSpec(name="provide_answer", description="Give the final answer.",
                  parameters={"type": "object", "properties": {"answer": {"type": "array", "items": {"type": "string"}}},
                              "required": ["answer"]})
ANSWER_ARGS = {"answer": ["the Mountain car rental rates"], "citations": [{"file": "alpha.pdf", "page": 1}]}
TASKS = [DocQATask(id=f"q{i}", question="Which vehicle rental rates are given for the winter season?",
                   answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
         for i in range(3)]


@pytest.fixture(autouse=True)
def _builtin_capabilities() -> Any:
    use_capabilities(None)
    yield
    use_capabilities(None)


@pytest.fixture
def mistral_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    def point(sim: SimMistral) -> None:
        monkeypatch.setenv("MISTRAL_BASE_URL", sim.base_url)
        monkeypatch.setenv("MISTRAL_API_KEY", sim.api_key)
    return point


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 200, 200)).save(buf, format="PNG")
    return buf.getvalue()


def tools(*calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    return {"kind": "tools", "calls": [{"name": n, "arguments": json.dumps(a)} for n, a in calls], "text": text}


def model(name: str = "pixtral-large-latest") -> ResilientModel:
    return ResilientModel(make_model(f"mistral/{name}"), policy=FAST)


def deskbench(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "MISTRAL_", "DESKBENCH_CAPABILITIES"))}
    return subprocess.run([sys.executable, "-m", "deskbench.cli", *args], capture_output=True, text=True,
                          env={**clean, **env}, timeout=timeout)


def _has_tool_result(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "tool" for m in body["messages"])


# --- a run end to end --------------------------------------------------------------------------------

def test_bm25_run_on_mistral_passes_every_rule(operator_corpus: Corpus, tmp_path: Path) -> None:
    """Two searches in one reply (each followed by its pages as a user message in deskbench's own
    conversation), then the answer: accepted on Mistral's API, whose role order refuses a user message
    after tool results, through a 429."""
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 2:
            return {"kind": "status", "status": 429, "retry_after": "0.05"}
        if not _has_tool_result(body):
            return tools(("search_documents", {"query": "winter rental rates"}), ("search_documents", {"query": "car"}))
        return tools(("provide_answer", ANSWER_ARGS))

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    with SimMistral(script=script) as sim:
        proc = deskbench("run", "--tasks", str(tasks), "--corpus", str(operator_corpus.root), "--agent", "bm25-agent",
                         "--model", "mistral/pixtral-large-latest", "--temperature", "0.3", "--out", str(tmp_path / "run"),
                         "--concurrency", "2", "--quiet",
                         env={"MISTRAL_BASE_URL": sim.base_url, "MISTRAL_API_KEY": sim.api_key})
    assert proc.returncode == 0, proc.stderr
    assert sim.refused == [], sim.refused[:1]
    assert [e.status for e in RunStore(tmp_path / "run").episodes()] == ["ok"] * 3
    last = [b for b in sim.accepted if _has_tool_result(b)]
    assert last and all(b["temperature"] == 0.3 and "seed" not in b for b in sim.accepted)
    roles = [m["role"] for m in last[0]["messages"]]
    first_tool = roles.index("tool")
    assert roles[first_tool:first_tool + 3] == ["tool", "tool", "assistant"]  # the results together, then the bridge
    assert last[0]["messages"][first_tool + 2]["content"] == BRIDGE and "user" in roles[first_tool + 3:]


# --- what the adapter sends ----------------------------------------------------------------------------

def test_seed_goes_out_as_random_seed_and_seed_itself_is_refused(mistral_env: Any) -> None:
    with SimMistral() as sim:
        mistral_env(sim)
        run(model().complete(ChatRequest(messages=[Message(role="user", content="hi")], seed=3, temperature=1.2,
                                         max_tokens=50)))
        import openai  # the SDK as any OpenAI-wire client: Mistral's schema forbids what it does not list

        client = openai.OpenAI(base_url=sim.base_url, api_key=sim.api_key, max_retries=0)
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            client.chat.completions.create(model="pixtral-large-latest", messages=[{"role": "user", "content": "hi"}],
                                           seed=3, max_completion_tokens=9)
    assert sim.accepted[0]["random_seed"] == 3 and sim.accepted[0]["temperature"] == 1.2
    assert sim.accepted[0]["max_tokens"] == 50
    detail = sim.refused[0]["body"]["message"]["detail"]
    assert sorted((d["type"], d["loc"][1]) for d in detail) == [("extra_forbidden", "max_completion_tokens"),
                                                                 ("extra_forbidden", "seed")]
    assert caught.value.status_code == 422


def test_tool_choice_forms_and_images_pass(mistral_env: Any) -> None:
    answer = tools(("provide_answer", {"answer": ["x"]}))
    with SimMistral(script=lambda b, n: answer) as sim:
        mistral_env(sim)
        m = model()
        for choice in ("auto", "required", "provide_answer", "none"):
            run(m.complete(ChatRequest(messages=[Message(role="user", content=[TextPart(text="q"),
                                                                                 ImagePart.of(png(40, 30))])],
                                       tools=[SEARCH, ANSWER], tool_choice=choice)))
        run(m.complete(ChatRequest(messages=[Message(role="user", content="json please")],
                                   response_schema={"type": "object", "properties": {"a": {"type": "string"}}})))
    assert sim.refused == [], sim.refused[:1]
    assert [b.get("tool_choice") for b in sim.accepted[:4]] == [
        "auto", "required", {"type": "function", "function": {"name": "provide_answer"}}, "none"]
    assert sim.accepted[4]["response_format"]["type"] == "json_schema"


def test_more_than_eight_images_keep_the_newest_eight(mistral_env: Any) -> None:
    pages = [ImagePart.of(png(20 + i, 20)) for i in range(11)]
    with SimMistral() as sim:
        mistral_env(sim)
        run(model().complete(ChatRequest(messages=[Message(role="user", content=[TextPart(text="q"), *pages])])))
    assert sim.refused == []
    sent = [p for p in sim.accepted[0]["messages"][0]["content"] if p["type"] == "image_url"]
    assert len(sent) == 8
    widths = [Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))).width for p in sent]
    assert widths == [23 + i for i in range(8)]  # the oldest three became a line of text
    with SimMistral() as sim:  # and the simulator holds the API to its 8
        body = {"model": "pixtral-large-latest", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": f"data:image/png;base64,{p.data_b64}"} for p in pages]}]}
        found = sim.check(body, {"authorization": f"Bearer {sim.api_key}"})
    assert found is not None and found[0] == "images" and found[1][0] == 400


# --- the role order Mistral enforces ------------------------------------------------------------------

def _conversation() -> list[Message]:
    calls = [ToolCall(id="aaaaaaaaa", name="search_documents", arguments='{"query": "a"}'),
             ToolCall(id="bbbbbbbbb", name="search_documents", arguments='{"query": "b"}')]
    return [Message(role="system", content="s"), Message(role="user", content="q"),
            Message(role="assistant", content="", tool_calls=calls),
            Message(role="tool", tool_call_id="aaaaaaaaa", content="Found 1 matching pages."),
            Message(role="user", content=[TextPart(text="Here are the matching pages:\n")]),
            Message(role="tool", tool_call_id="bbbbbbbbb", content="Found 0 matching pages."),
            Message(role="user", content="You must now provide your final answer.")]


def test_tool_results_first_moves_results_up_and_bridges_to_the_user() -> None:
    conversation = _conversation()
    ordered = tool_results_first(conversation)
    assert [m.role for m in ordered] == ["system", "user", "assistant", "tool", "tool", "assistant", "user", "user"]
    assert [m.tool_call_id for m in ordered[3:5]] == ["aaaaaaaaa", "bbbbbbbbb"] and ordered[5].content == BRIDGE
    assert ordered[6] is conversation[4] and ordered[7] is conversation[6]  # nothing changed, nothing dropped
    assert tool_results_first(ordered) is ordered  # already in order: the same list
    plain = conversation[:2]
    assert tool_results_first(plain) is plain


def test_the_user_after_tool_refusal_stops_a_model_without_the_rule(mistral_env: Any, tmp_path: Path) -> None:
    """With a capability file that says Mistral takes a user message after tool results (it does not),
    the API's own 400 comes back as one line, never retried. The simulator's relaxed mode (mistral-common
    from 2026-04-27 on) takes a user message after the results, but not a result after a user message:
    the interleaved order the official scripts write is refused either way, so the results go first."""
    caps = tmp_path / "caps.toml"
    caps.write_text('[[rules]]\nprovider = "mistral"\nmodel = "*"\nset = { user_after_tool = true }\n')
    use_capabilities(caps)
    request = ChatRequest(messages=_conversation(), tools=[SEARCH, ANSWER], tool_choice="provide_answer")
    with SimMistral() as sim:
        mistral_env(sim)
        with pytest.raises(ProviderRefused, match=r"HTTP 400: Unexpected role 'user' after role 'tool'"):
            run(model().complete(request))
    assert len(sim.requests) == 1 and sim.refused[0]["body"]["type"] == "invalid_request_message_order"
    with SimMistral(user_after_tool=True) as relaxed:
        mistral_env(relaxed)
        with pytest.raises(ProviderRefused, match=r"HTTP 400: Unexpected role 'tool' after role 'user'"):
            run(model().complete(request))
        one_call = [*request.messages[:2], request.messages[2].model_copy(update={"tool_calls": request.messages[2].tool_calls[:1]}),
                    *request.messages[3:5]]
        run(model().complete(request.model_copy(update={"messages": one_call})))
    assert len(relaxed.refused) == 1 and len(relaxed.accepted) == 1


@pytest.mark.parametrize(("change", "rule", "words"), [
    (lambda ms: ms[2].tool_calls.__setitem__(0, ToolCall(id="call_1", name="search_documents", arguments="{}")),
     "message_content", "Tool call id was call_1 but must be a-z, A-Z, 0-9, with a length of 9."),
    (lambda ms: ms.pop(3), "message_structure", "Not the same number of function calls and responses"),
    (lambda ms: ms.append(Message(role="assistant", content="done")), "message_structure",
     "Expected last role User or Tool (or Assistant with prefix True) for serving but got assistant"),
])
def test_message_rules_answer_in_the_apis_words(change: Any, rule: str, words: str) -> None:
    from deskbench.models.openai_chat import request_kwargs

    messages = tool_results_first(_conversation())
    change(messages)
    body = {"model": "pixtral-large-latest", **request_kwargs(ChatRequest(messages=messages),
                                                              capabilities("mistral/pixtral-large-latest"))}
    with SimMistral() as sim:
        found = sim.check(body, {"authorization": f"Bearer {sim.api_key}"})
    assert found is not None and found[0] == rule and found[1][1]["message"] == words


# --- refusals and failures -------------------------------------------------------------------------------

def test_a_422_names_the_field_and_is_the_users_to_fix(mistral_env: Any, tmp_path: Path) -> None:
    caps = tmp_path / "caps.toml"  # a wrong entry: Mistral's seed is random_seed, and it has no 2.0 temperature
    caps.write_text('[[rules]]\nprovider = "mistral"\nmodel = "*"\nset = { seed_field = "seed", temperature_max = 2.0 }\n')
    use_capabilities(caps)
    with SimMistral() as sim:
        mistral_env(sim)
        with pytest.raises(ProviderRefused) as caught:
            run(model().complete(ChatRequest(messages=[Message(role="user", content="hi")], seed=1, temperature=1.9)))
    line = str(caught.value)
    assert "HTTP 422: seed: Extra inputs are not permitted; temperature: Input should be less than or equal to 1.5" \
           in line and "change or drop --temperature" in line and "\n" not in line
    assert len(sim.requests) == 1


def test_unknown_model_bad_key_and_rate_limit(mistral_env: Any) -> None:
    with SimMistral() as sim:
        mistral_env(sim)
        with pytest.raises(ProviderRefused, match=r"HTTP 400: Invalid model: pixtral-huge\); check the model name in --model"):
            run(model("pixtral-huge").complete(ChatRequest(messages=[Message(role="user", content="hi")])))
    with SimMistral(api_key="the-right-key") as sim:
        mistral_env(sim)
        os.environ["MISTRAL_API_KEY"] = "a-wrong-key"
        with pytest.raises(ProviderRefused) as caught:
            run(model().complete(ChatRequest(messages=[Message(role="user", content="hi")])))
    assert "HTTP 401: Unauthorized" in str(caught.value) and "check the key in MISTRAL_API_KEY" in str(caught.value)
    assert "a-wrong-key" not in str(caught.value)
    limited = {"kind": "status", "status": 429, "retry_after": "0.01"}
    with SimMistral(script=lambda b, n: limited if n < 3 else {"kind": "text", "text": "fine"}) as sim:
        mistral_env(sim)
        reply = run(model().complete(ChatRequest(messages=[Message(role="user", content="hi")])))
    assert reply.message.content == "fine" and len(sim.requests) == 3
    with SimMistral(script=lambda b, n: limited) as sim:
        mistral_env(sim)
        with pytest.raises(ModelError, match="Rate limit exceeded"):
            run(model().complete(ChatRequest(messages=[Message(role="user", content="hi")])))


# --- the provider's name, key, capabilities and price --------------------------------------------------------

def test_model_string_key_capabilities_and_price(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_spec("mistral/pixtral-large-latest").id == "mistral/pixtral-large-latest"
    with pytest.raises(UserError, match=r"model 'mistral/' needs a model name, e.g. mistral/pixtral-large-latest"):
        parse_spec("mistral/")
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    with pytest.raises(UserError, match="mistral/pixtral-large-latest needs an API key: set MISTRAL_API_KEY"):
        preflight("mistral/pixtral-large-latest")
    caps = capabilities("mistral/pixtral-large-latest")
    assert (caps.seed_field, caps.user_after_tool, caps.max_images, caps.output_limit) == ("random_seed", False, 8,
                                                                                          "max_tokens")
    assert not capabilities("mistral/codestral-latest").vision
    monkeypatch.setenv("MISTRAL_API_KEY", "k")
    with pytest.raises(UserError, match=r"--temperature 1.6: mistral/pixtral-large-latest"):
        preflight("mistral/pixtral-large-latest", __import__("deskbench.models.settings", fromlist=["Sampling"])
                  .Sampling(temperature=1.6))
    assert PriceTable().price("mistral/pixtral-large-latest") == (2.0, 6.0)


def test_simulator_replies_in_mistrals_shape() -> None:
    body = completion({"kind": "tools", "calls": [{"name": "a", "arguments": "{}"}, {"name": "b", "arguments": "{}"}]},
                      4, "pixtral-large-latest")
    calls = body["choices"][0]["message"]["tool_calls"]
    assert [c["index"] for c in calls] == [0, 1] and all(len(c["id"]) == 9 and c["id"].isalnum() for c in calls)
    assert body["choices"][0]["finish_reason"] == "tool_calls" and body["choices"][0]["message"]["content"] == ""
