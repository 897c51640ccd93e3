"""The native Gemini adapter (models/gemini_native.py, provider `google/`) against the strict
simulator of generateContent (tests/sim_gemini_native.py): the bodies it sends, what it reads
back, how refusals map to ModelError; and the simulator's own rules, each refusing with the
API's status and text."""

from __future__ import annotations

import asyncio
import base64
import http.client
import io
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from PIL import Image
from sim_gemini_native import RULES, SimGeminiNative

from deskbench.errors import UserError
from deskbench.models.gemini_native import GeminiNative, parse_reply, to_schema
from deskbench.models.registry import check_key, parse_spec
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

KEY = "test-gemini-key"
MODEL = "gemini-2.5-flash"
SEARCH = ToolSpec(name="search_documents", description="Search the documents.",
                  parameters={"type": "object", "properties": {"query": {"type": "string", "description": "the query"}},
                              "required": ["query"], "additionalProperties": False})


def png(width: int = 30, height: int = 20) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(buf, format="PNG")
    return buf.getvalue()


def complete(sim: SimGeminiNative, request: ChatRequest, model: str = MODEL, key: str = KEY) -> Any:
    async def go() -> Any:
        adapter = GeminiNative(model, base_url=sim.base_url, api_key=key)
        try:
            return await adapter.complete(request)
        finally:
            await adapter.aclose()

    return asyncio.run(go())


def post(sim: SimGeminiNative, body: Any, *, model: str = MODEL, key: str | None = KEY,
         query: str = "%24alt=json%3Benum-encoding%3Dint") -> tuple[int, Any]:
    url = urlsplit(sim.base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["x-goog-api-key"] = key
    conn.request("POST", f"/v1beta/models/{model}:generateContent?{query}",
                 body=body if isinstance(body, bytes) else json.dumps(body).encode(), headers=headers)
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data


def user(text: str = "What is on page 1?") -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


# --- the adapter's requests -------------------------------------------------------------------
def test_a_text_request_is_the_sdks_rest_body_and_is_accepted() -> None:
    with SimGeminiNative() as sim:
        reply = complete(sim, ChatRequest(messages=[Message(role="system", content="Be brief."),
                                                    Message(role="user", content="hi")]))
    assert sim.refused == [] and reply.message.content == "ok" and reply.finish_reason == "STOP"
    assert sim.requests == [{"contents": [{"parts": [{"text": "hi"}], "role": "user"}], "generationConfig": {},
                             "systemInstruction": {"parts": [{"text": "Be brief."}]}}]
    assert sim.paths == [f"/v1beta/models/{MODEL}:generateContent?%24alt=json%3Benum-encoding%3Dint"]
    assert sim.headers[0]["x-goog-api-key"] == KEY
    assert sim.headers[0]["x-goog-request-params"] == f"model=models/{MODEL}"  # as the SDK routes it
    assert reply.usage.input_tokens == 100 and reply.usage.output_tokens == 20 and reply.model == MODEL


def test_a_tool_loop_sends_calls_back_with_their_signature_and_answers_them_in_one_user_turn() -> None:
    sig = base64.b64encode(b"opaque-signature").decode()
    script = iter([{"kind": "calls", "text": "Searching.", "calls": [
        {"name": "search_documents", "args": {"query": "engine"}, "signature": sig},
        {"name": "search_documents", "args": {"query": "Bell 407"}}]}, {"kind": "text", "text": "done"}])
    with SimGeminiNative(script=lambda body, n: next(script)) as sim:
        first = ChatRequest(messages=[Message(role="user", content="Find the engine.")], tools=[SEARCH])
        reply = complete(sim, first)
        calls = reply.message.tool_calls
        assert [c.name for c in calls] == ["search_documents"] * 2 and calls[0].signature == sig
        assert json.loads(calls[1].arguments) == {"query": "Bell 407"} and reply.message.content == "Searching."
        image = ImagePart.of(png(), "image/webp")
        second = ChatRequest(messages=[*first.messages, reply.message,
                                       Message(role="tool", tool_call_id=calls[0].id, content="Found 1 matching pages."),
                                       Message(role="tool", tool_call_id=calls[1].id, content="Found 0 matching pages."),
                                       Message(role="user", content=[TextPart(text="\nFile: a.pdf, Page: 1"), image])],
                             tools=[SEARCH])
        assert complete(sim, second).message.content == "done"
    assert sim.refused == []
    body = sim.requests[1]
    assert body["tools"] == [{"functionDeclarations": [{
        "name": "search_documents", "description": "Search the documents.",
        "parameters": {"type": 6, "properties": {"query": {"type": 1, "description": "the query"}},
                       "required": ["query"]}}]}]
    assert body["contents"][1] == {"role": "model", "parts": [
        {"text": "Searching."},
        {"functionCall": {"name": "search_documents", "args": {"query": "engine"}}, "thoughtSignature": sig},
        {"functionCall": {"name": "search_documents", "args": {"query": "Bell 407"}}}]}
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "search_documents", "response": {"result": "Found 1 matching pages."}}},
        {"functionResponse": {"name": "search_documents", "response": {"result": "Found 0 matching pages."}}},
        {"text": "\nFile: a.pdf, Page: 1"},
        {"inlineData": {"mimeType": "image/webp", "data": image.data_b64}}]}


def test_an_unanswered_call_is_refused_by_the_api_and_ends_the_episode_not_the_run() -> None:
    call = ToolCall(id="c1", name="search_documents", arguments='{"query": "x"}')
    request = ChatRequest(messages=[Message(role="user", content="q"),
                                    Message(role="assistant", tool_calls=[call]),
                                    Message(role="user", content="Please continue.")], tools=[SEARCH])
    with SimGeminiNative() as sim, pytest.raises(ModelError) as caught:
        complete(sim, request)
    assert sim.refused[0]["rule"] == "function_responses_match_calls"
    error = caught.value
    assert error.status == 400 and not error.fatal and not error.retryable
    assert "number of function response parts is equal to the number of function call parts" in str(error)


def test_tool_choice_forms_and_the_structured_output_schema() -> None:
    schema = {"$defs": {"Citation": {"type": "object", "additionalProperties": False,
                                     "properties": {"file": {"type": "string"}, "page": {"type": "integer"}},
                                     "required": ["file", "page"]}},
              "type": "object", "additionalProperties": False,
              "properties": {"answer": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                             "citations": {"type": "array", "items": {"$ref": "#/$defs/Citation"}},
                             "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                             "kind": {"type": "string", "enum": ["a", "b"]}},
              "required": ["answer", "citations"]}
    with SimGeminiNative(script=lambda body, n: {"kind": "text", "text": '{"answer": ["x"], "citations": []}'}) as sim:
        complete(sim, ChatRequest(messages=[Message(role="user", content="q")], response_schema=schema,
                                  temperature=0.0, max_tokens=300, seed=7))
        for choice in ("auto", "none", "required", "search_documents"):
            complete(sim, ChatRequest(messages=[Message(role="user", content="q")], tools=[SEARCH], tool_choice=choice))
    assert sim.refused == []
    config = sim.requests[0]["generationConfig"]
    assert config == {"maxOutputTokens": 300, "temperature": 0.0, "seed": 7, "responseMimeType": "application/json",
                      "responseSchema": {"type": 6, "required": ["answer", "citations"], "properties": {
                          "answer": {"type": 5, "minItems": "1", "items": {"type": 1}},
                          "citations": {"type": 5, "items": {"type": 6, "required": ["file", "page"], "properties": {
                              "file": {"type": 1}, "page": {"type": 3}}}},
                          "note": {"type": 1, "nullable": True},
                          "kind": {"type": 1, "format": "enum", "enum": ["a", "b"]}}}}
    assert [r.get("toolConfig") for r in sim.requests[1:]] == [
        {"functionCallingConfig": {"mode": 1}}, {"functionCallingConfig": {"mode": 3}},
        {"functionCallingConfig": {"mode": 2}},
        {"functionCallingConfig": {"mode": 2, "allowedFunctionNames": ["search_documents"]}}]
    with pytest.raises(ProviderRefused, match="response schema in a request with tools"):
        complete(sim, ChatRequest(messages=[Message(role="user", content="q")], tools=[SEARCH], response_schema=schema))


def test_reasoning_effort_is_a_thinking_budget_and_thoughts_are_kept_apart() -> None:
    with SimGeminiNative(script=lambda body, n: {"kind": "text", "text": "42", "thinking": "Let me think.",
                                                 "thoughts_tokens": 50}) as sim:
        reply = complete(sim, ChatRequest(messages=[Message(role="user", content="q")], reasoning_effort="low"))
        with pytest.raises(ProviderRefused, match="reasoning effort 'none'"):
            complete(sim, ChatRequest(messages=[Message(role="user", content="q")], reasoning_effort="none"),
                     model="gemini-2.5-pro")
    assert sim.requests[0]["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 1024}}
    assert reply.message.content == "42" and reply.reasoning == "Let me think."
    assert reply.usage.output_tokens == 70 and reply.usage.reasoning_tokens == 50


def test_odd_replies_come_back_as_finish_reasons() -> None:
    behaviours = iter([{"kind": "finish", "reason": "MALFORMED_FUNCTION_CALL"}, {"kind": "blocked", "reason": "SAFETY"},
                       {"kind": "calls", "calls": [{"name": "search_documents", "args": {"query": "x"}}]}])
    with SimGeminiNative(script=lambda body, n: next(behaviours)) as sim:
        request = ChatRequest(messages=[Message(role="user", content="q")], tools=[SEARCH])
        malformed = complete(sim, request)
        blocked = complete(sim, request)
        unexpected = complete(sim, ChatRequest(messages=[Message(role="user", content="q")]))
    assert (malformed.finish_reason, malformed.message.content, malformed.message.tool_calls) == (
        "MALFORMED_FUNCTION_CALL", "", [])
    assert blocked.finish_reason == "PROMPT_BLOCKED:SAFETY"
    assert unexpected.finish_reason == "UNEXPECTED_TOOL_CALL" and unexpected.message.tool_calls == []
    # string enums (the API's default encoding) read the same
    assert parse_reply({"candidates": [{"finishReason": "MAX_TOKENS", "content": {"parts": [{"text": "a"}, {"text": "b"}]}}]},
                       MODEL).message.text() == "a\nb"


def test_refusals_map_to_model_errors_as_the_retry_policy_needs() -> None:
    with SimGeminiNative(script=lambda body, n: {"kind": "status", "status": 429, "retry_delay": "3s"}) as sim:
        with pytest.raises(ModelError) as rate:
            complete(sim, ChatRequest(messages=[Message(role="user", content="q")]))
        with pytest.raises(ModelError) as key:
            complete(sim, ChatRequest(messages=[Message(role="user", content="q")]), key="wrong")
        with pytest.raises(ModelError) as unknown:
            complete(sim, ChatRequest(messages=[Message(role="user", content="q")]), model="gemini-1.0-pro")

        async def resilient() -> None:
            model = ResilientModel(GeminiNative(MODEL, base_url=sim.base_url, api_key="wrong"),
                                   policy=RetryPolicy(attempts=1))
            try:
                await model.complete(ChatRequest(messages=[Message(role="user", content="q")]))
            finally:
                await model.aclose()

        with pytest.raises(ProviderRefused, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
            asyncio.run(resilient())
    assert rate.value.retryable and rate.value.retry_after == 3.0 and "RESOURCE_EXHAUSTED" in str(rate.value)
    assert key.value.fatal and "API key not valid" in str(key.value)
    assert unknown.value.fatal and unknown.value.status == 404


def test_schemas_become_the_apis_schema() -> None:
    assert to_schema({"type": ["string", "null"], "description": "d", "title": "T", "maxLength": 5}) == {
        "nullable": True, "type": 1, "description": "d", "title": "T", "maxLength": "5"}
    with pytest.raises(ProviderRefused, match="does not resolve"):
        to_schema({"$ref": "#/$defs/Missing"})


def test_the_google_provider_reads_either_documented_key(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec("google/gemini-2.5-flash")
    assert (spec.provider, spec.name, spec.id) == ("google", "gemini-2.5-flash", "google/gemini-2.5-flash")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(UserError, match="set GEMINI_API_KEY or GOOGLE_API_KEY"):
        check_key(spec)
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    check_key(spec)
    monkeypatch.setenv("GEMINI_API_KEY", "first")
    from deskbench.models.gemini_native import key_from_env

    assert key_from_env() == "first"  # google.generativeai reads GEMINI_API_KEY first


# --- the simulator's rules --------------------------------------------------------------------
CALL = {"role": "model", "parts": [{"functionCall": {"name": "search_documents", "args": {"query": "x"}}}]}
RESPONSE = {"role": "user", "parts": [{"functionResponse": {"name": "search_documents", "response": {"result": "r"}}}]}
TOOLS = [{"functionDeclarations": [{"name": "search_documents", "description": "d", "parameters": {
    "type": "OBJECT", "properties": {"query": {"type": "STRING"}}, "required": ["query"]}}]}]

REFUSED: list[tuple[str, dict[str, Any], int, str]] = [
    ("known_fields", {"contents": [user()], "google": {}}, 400,
     'Invalid JSON payload received. Unknown name "google": Cannot find field.'),
    ("known_fields", {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "content": 1}}]}]}, 400,
     "Unknown name \"content\" at 'contents[0].parts[0].function_response': Cannot find field."),
    ("known_fields", {"contents": [user()], "tools": [{"functionDeclarations": [{"name": "f", "parameters": {
        "type": "OBJECT", "properties": {"a": {"type": "STRING", "additionalProperties": False}}}}]}]}, 400,
     "Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters.properties[0].value'"),
    ("contents_given", {"contents": []}, 400, "* GenerateContentRequest.contents: contents is not specified"),
    ("role_valid", {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, 400,
     "Please use a valid role: user, model."),
    ("parts_nonempty", {"contents": [user(), {"role": "model", "parts": []}]}, 400,
     "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n"),
    ("part_has_data", {"contents": [{"role": "user", "parts": [{"thought": True}]}]}, 400,
     "required oneof field 'data' must have one initialized field"),
    ("bytes_are_base64", {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png",
                                                                                   "data": "not base64!"}}]}]}, 400,
     "Invalid value at 'contents[0].parts[0].inline_data.data' (TYPE_BYTES), Base64 decoding failed"),
    ("image_mime_supported", {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/gif",
                                                                                       "data": "R0lG"}}]}]}, 400, "image/gif"),
    ("function_call_turn_follows_user", {"contents": [CALL, RESPONSE], "tools": TOOLS}, 400,
     "Please ensure that function call turn comes immediately after a user turn or after a function response turn."),
    ("function_response_follows_call", {"contents": [user(), RESPONSE], "tools": TOOLS}, 400,
     "Please ensure that function response turn comes immediately after a function call turn."),
    ("function_responses_match_calls", {"contents": [user(), CALL, user("Please continue.")], "tools": TOOLS}, 400,
     "Please ensure that the number of function response parts is equal to the number of function call parts"),
    ("function_names_valid", {"contents": [user()], "tools": [{"functionDeclarations": [{"name": "1search"}]}]}, 400,
     "function_declarations[0].name: Invalid function name. Must start with a letter or an underscore."),
    ("schemas_valid", {"contents": [user()], "tools": [{"functionDeclarations": [{"name": "f", "parameters": {
        "type": "OBJECT", "properties": {}}}]}]}, 400,
     "* GenerateContentRequest.tools[0].function_declarations[0].parameters.properties: should be non-empty for OBJECT type\n"),
    ("no_json_mime_with_functions", {"contents": [user()], "tools": TOOLS,
                                     "generationConfig": {"responseMimeType": "application/json"}}, 400,
     "Function calling with a response mime type: 'application/json' is unsupported"),
    ("response_schema_needs_json", {"contents": [user()], "generationConfig": {"responseSchema": {"type": "STRING"}}}, 400,
     "response_mime_type"),
    ("temperature_in_range", {"contents": [user()], "generationConfig": {"temperature": 2.5}}, 400, "temperature"),
    ("top_k_integer", {"contents": [user()], "generationConfig": {"topK": 2.5}}, 400,
     "Invalid value at 'generation_config.top_k' (TYPE_INT32), 2.5"),
    ("max_output_in_range", {"contents": [user()], "generationConfig": {"maxOutputTokens": 70000}}, 400, "65536"),
    ("thinking_budget_in_range", {"contents": [user()], "generationConfig": {"thinkingConfig": {"thinkingBudget": 52428}}},
     400, "The thinking budget (52428) is invalid."),
]


@pytest.mark.parametrize(("rule", "body", "status", "text"), REFUSED, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSED)])
def test_each_rule_refuses_with_the_apis_status_and_text(rule: str, body: dict[str, Any], status: int, text: str) -> None:
    with SimGeminiNative() as sim:
        got_status, got = post(sim, body)
    assert sim.refused[0]["rule"] == rule
    assert got_status == status and text in got["error"]["message"]
    assert got["error"]["code"] == status and got["error"]["status"] == "INVALID_ARGUMENT"


def test_every_rule_has_a_refusal_case() -> None:
    assert {name for name, _ in RULES} - {r[0] for r in REFUSED} == {"calling_mode_known", "thinking_supported"}


def test_model_specific_thinking_rules() -> None:
    with SimGeminiNative() as sim:
        assert post(sim, {"contents": [user()], "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
                    model="gemini-2.5-pro")[1]["error"]["message"] == "Budget 0 is invalid. This model only works in thinking mode."
        assert "thinking is not supported by this model" in post(
            sim, {"contents": [user()], "generationConfig": {"thinkingConfig": {"thinkingBudget": 100}}},
            model="gemini-2.0-flash-exp")[1]["error"]["message"]
        assert "function_calling_config.mode" in post(
            sim, {"contents": [user()], "tools": TOOLS, "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}}
        )[1]["error"]["message"]
        assert post(sim, {"contents": [user()], "generationConfig": {"thinkingConfig": {"thinkingBudget": -1}}},
                    model="gemini-2.5-pro")[0] == 200
    assert [r["rule"] for r in sim.refused] == ["thinking_budget_in_range", "thinking_supported", "calling_mode_known"]


def test_keys_models_and_encodings() -> None:
    with SimGeminiNative() as sim:
        no_key = post(sim, {"contents": [user()]}, key=None)
        bad_key = post(sim, {"contents": [user()]}, key="nope")
        unknown = post(sim, {"contents": [user()]}, model="gemini-pro")
        names = post(sim, {"contents": [user()]}, query="")  # string enums unless $alt asks for numbers
        numbers = post(sim, {"contents": [user()]})
        snake = post(sim, {"contents": [user()], "generation_config": {"max_output_tokens": 10}})
        not_json = post(sim, b"{not json")
    assert no_key[0] == 403 and no_key[1]["error"]["status"] == "PERMISSION_DENIED"
    assert bad_key[0] == 400 and bad_key[1]["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    assert unknown[0] == 404 and unknown[1]["error"]["message"].startswith(
        "models/gemini-pro is not found for API version v1beta, or is not supported for generateContent.")
    assert names[1]["candidates"][0]["finishReason"] == "STOP"
    assert numbers[1]["candidates"][0]["finishReason"] == 1
    assert snake[0] == 200 and not_json[0] == 400
