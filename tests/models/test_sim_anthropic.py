"""The strict Anthropic simulator: each rule refuses with the documented status and text, valid
requests get well-formed Messages, injected failures look like the real ones. Raw HTTP (not the
project's adapters), plus the official SDK to prove the bodies parse as it expects."""

from __future__ import annotations

import base64
import http.client
import io
import json
import time
from typing import Any

import pytest
from PIL import Image
from sim_anthropic import (
    DEFAULT_MODELS,
    MAX_IMAGE_BASE64_CHARS,
    RULES,
    SimAnthropic,
)

OLD = "2023-06-01"
NEW = "2026-10-21"
MODEL = "claude-sonnet-4-5"
SDK_MODEL = "claude-haiku-4-5"  # the SDK warns that Sonnet 4.5 is deprecated (end of life 2026-11-30)


def post(sim: SimAnthropic, body: Any, *, version: str | None = OLD, key: str | None = "sk-ant-test",
         bearer: str | None = None, path: str = "/v1/messages",
         extra_headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    headers = {"content-type": "application/json"}
    if version is not None:
        headers["anthropic-version"] = version
    if key is not None:
        headers["x-api-key"] = key
    if bearer is not None:
        headers["authorization"] = f"Bearer {bearer}"
    headers.update(extra_headers or {})
    port = int(sim.base_url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    hdrs = {k.lower(): v for k, v in resp.getheaders()}
    conn.close()
    parsed = json.loads(raw) if hdrs.get("content-type", "").startswith("application/json") else raw.decode()
    return resp.status, hdrs, parsed


def req(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}]}
    body.update(over)
    return {k: v for k, v in body.items() if v is not ...}


def png(w: int = 8, h: int = 8, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (200, 10, 10)).save(buf, format=fmt)
    return buf.getvalue()


def image_block(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                        "data": base64.b64encode(data).decode()}}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


TOOL = {"name": "search", "description": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
TOOL_USE = {"type": "tool_use", "id": "toolu_01A", "name": "search", "input": {"q": "x"}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "nothing"}


@pytest.fixture
def sim() -> Any:
    with SimAnthropic() as s:
        yield s


def refused(sim: SimAnthropic, body: Any, status: int, etype: str, message: str, rule: str, **kw: Any) -> None:
    code, headers, payload = post(sim, body, **kw)
    assert code == status, payload
    assert payload["type"] == "error"
    assert payload["error"] == {"type": etype, "message": message}
    assert payload["request_id"].startswith("req_") and headers["request-id"] == payload["request_id"]
    assert sim.refused[-1]["rule"] == rule and sim.refused[-1]["status"] == status
    assert not sim.accepted


def bad(sim: SimAnthropic, body: Any, message: str, rule: str, **kw: Any) -> None:
    refused(sim, body, 400, "invalid_request_error", message, rule, **kw)


# --- headers ------------------------------------------------------------------------------------
def test_api_key(sim: SimAnthropic) -> None:
    refused(sim, req(), 401, "authentication_error", "x-api-key header is required", "api_key_present", key=None)
    refused(sim, req(), 401, "authentication_error", "invalid x-api-key", "api_key_valid", key="sk-ant-wrong")
    refused(sim, req(), 401, "authentication_error", "invalid x-api-key", "api_key_valid", key=None, bearer="nope")


def test_bearer_key_accepted_and_x_api_key_wins(sim: SimAnthropic) -> None:
    assert post(sim, req(), key=None, bearer="sk-ant-test")[0] == 200
    assert post(sim, req(), key="sk-ant-wrong", bearer="sk-ant-test")[0] == 401


def test_anthropic_version(sim: SimAnthropic) -> None:
    bad(sim, req(), "anthropic-version: header is required", "version_present", version=None)
    bad(sim, req(), 'anthropic-version: "2023-10-01" is not a valid version', "version_known", version="2023-10-01")


# --- top-level fields ---------------------------------------------------------------------------
def test_max_tokens_required(sim: SimAnthropic) -> None:
    bad(sim, req(max_tokens=...), "max_tokens: Field required", "required_fields")


def test_max_tokens_integer_and_model_limit(sim: SimAnthropic) -> None:
    bad(sim, req(max_tokens="10"), "max_tokens: Input should be a valid integer", "max_tokens_integer")
    bad(sim, req(max_tokens=-1), "max_tokens: Input should be greater than or equal to 0", "max_tokens_not_negative")
    bad(sim, req(max_tokens=64_001),
        "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5",
        "max_tokens_model_limit")
    bad(sim, req(model="claude-opus-4-1", max_tokens=32_001),
        "max_tokens: 32001 > 32000, which is the maximum allowed number of output tokens for claude-opus-4-1",
        "max_tokens_model_limit")


def test_max_tokens_limit_accepted_and_zero_prewarms(sim: SimAnthropic) -> None:
    assert post(sim, req(max_tokens=64_000))[0] == 200
    assert post(sim, req(model="claude-opus-4-6", max_tokens=128_000))[0] == 200
    code, _, msg = post(sim, req(max_tokens=0))
    assert code == 200 and msg["content"] == [] and msg["stop_reason"] == "max_tokens"


def test_unknown_model(sim: SimAnthropic) -> None:
    refused(sim, req(model="claude-nope"), 404, "not_found_error", "model: claude-nope", "model_served")
    refused(sim, req(model="claude-3-5-haiku-20241022"), 404, "not_found_error",
            "model: claude-3-5-haiku-20241022", "model_served")  # retired, not served by default


def test_unknown_top_level_field(sim: SimAnthropic) -> None:
    bad(sim, req(response_format={"type": "json"}), "response_format: Extra inputs are not permitted", "extra_fields")


def test_sampling_parameters_removed_in_2026_10_21(sim: SimAnthropic) -> None:
    bad(sim, req(temperature=1.0), "temperature: Extra inputs are not permitted", "extra_fields", version=NEW)
    bad(sim, req(top_k=5), "top_k: Extra inputs are not permitted", "extra_fields", version=NEW)
    assert post(sim, req(temperature=0.0), version=OLD)[0] == 200


def test_metadata_and_stop_sequences(sim: SimAnthropic) -> None:
    bad(sim, req(metadata={"user_id": "u", "session": "s"}), "metadata.session: Extra inputs are not permitted",
        "metadata_shape")
    bad(sim, req(stop_sequences="END"), "stop_sequences: Input should be a valid list of strings", "stop_sequences_shape")
    assert post(sim, req(metadata={"user_id": "u"}, stop_sequences=["END"]))[0] == 200


def test_system(sim: SimAnthropic) -> None:
    bad(sim, req(messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]),
        "role 'system' is not supported on this model", "message_role")
    bad(sim, req(system=[{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}, "scope": 1}]),
        "system.0.scope: Extra inputs are not permitted", "system_shape")
    assert post(sim, req(system="be brief"))[0] == 200
    assert post(sim, req(system=[text("be brief")]))[0] == 200


# --- messages -----------------------------------------------------------------------------------
def test_messages_roles_and_alternation(sim: SimAnthropic) -> None:
    bad(sim, req(messages=[{"role": "tool", "content": "x"}]),
        "messages.0.role: Input should be 'user', 'assistant' or 'system'", "message_role")
    bad(sim, req(messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row',
        "strict_alternation")


def test_consecutive_turns_combined_when_not_strict() -> None:
    """What the API actually does (MESSAGES_REF): consecutive same-role turns are combined; the tool
    rules then apply to the combined turns."""
    with SimAnthropic(strict_alternation=False) as sim:
        two_users = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        assert post(sim, req(messages=two_users))[0] == 200
        split = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [TOOL_USE]},
                 user(TOOL_RESULT), {"role": "user", "content": "and then?"}]
        assert post(sim, req(messages=split, tools=[TOOL]))[0] == 200
        late = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [TOOL_USE]},
                {"role": "user", "content": "first"}, user(TOOL_RESULT)]
        code, _, body = post(sim, req(messages=late, tools=[TOOL]))
        assert code == 400 and body["error"]["message"].startswith("messages.2: Did not find 1 tool_result block(s)")


def test_assistant_first_message_accepted(sim: SimAnthropic) -> None:
    msgs = [{"role": "assistant", "content": "Hello"}, {"role": "user", "content": "hi"}]
    assert post(sim, req(messages=msgs))[0] == 200


def test_empty_content_and_text(sim: SimAnthropic) -> None:
    bad(sim, req(messages=[{"role": "user", "content": ""}]),
        "messages.0: all messages must have non-empty content except for the optional final assistant message",
        "message_content_nonempty")
    bad(sim, req(messages=[user(text(""))]), "messages: text content blocks must be non-empty", "text_nonempty")
    bad(sim, req(messages=[user(text("  \n"))]), "messages: text content blocks must contain non-whitespace text",
        "text_nonempty")
    bad(sim, req(messages=[user({"type": "text", "text": "hi", "extra": 1})]),
        "messages.0.content.0.text.extra: Extra inputs are not permitted", "block_shape")
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]
    assert post(sim, req(messages=prefill))[0] == 200


def test_tool_use_needs_tool_result_immediately_after(sim: SimAnthropic) -> None:
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [TOOL_USE]},
            {"role": "user", "content": "no result"}]
    bad(sim, req(messages=msgs, tools=[TOOL]),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        "tool_use_answered")


def test_tool_results_come_first(sim: SimAnthropic) -> None:
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [TOOL_USE]},
            user(text("here:"), TOOL_RESULT)]
    bad(sim, req(messages=msgs, tools=[TOOL]),
        "messages.2: Did not find 1 tool_result block(s) at the beginning of this message. Messages following "
        "tool_use blocks must begin with a matching number of tool_result blocks.", "tool_results_first")


def test_tool_result_without_tool_use(sim: SimAnthropic) -> None:
    bad(sim, req(messages=[user(TOOL_RESULT)]),
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01A. Each "
        "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
        "tool_result_has_tool_use")
    bad(sim, req(messages=[user(text("x"), {**TOOL_USE})]),
        "messages.0.content.1: `tool_use` blocks are not allowed in `user` messages", "block_shape")


def test_tool_round_trip_accepted() -> None:
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            return {"kind": "tool", "name": "search", "arguments": '{"q": "x"}'}
        return {"kind": "text", "text": "done"}

    with SimAnthropic(script=script) as sim:
        first = [{"role": "user", "content": "look it up"}]
        code, _, msg = post(sim, req(messages=first, tools=[TOOL], tool_choice={"type": "tool", "name": "search"}))
        assert code == 200 and msg["stop_reason"] == "tool_use"
        call = msg["content"][-1]
        assert call["type"] == "tool_use" and call["id"].startswith("toolu_") and call["input"] == {"q": "x"}
        follow = [*first, {"role": "assistant", "content": msg["content"]},
                  user({"type": "tool_result", "tool_use_id": call["id"], "content": "42"}, text("thanks"))]
        code, _, msg = post(sim, req(messages=follow, tools=[TOOL]))
        assert code == 200 and msg["content"] == [{"type": "text", "text": "done"}]
        assert len(sim.accepted) == 2 and not sim.refused


# --- images -------------------------------------------------------------------------------------
def test_valid_images_accepted(sim: SimAnthropic) -> None:
    blocks = [image_block(png()), image_block(png(fmt="JPEG"), "image/jpeg"), image_block(png(fmt="GIF"), "image/gif"),
              image_block(png(fmt="WEBP"), "image/webp"),
              {"type": "image", "source": {"type": "url", "url": "https://example.invalid/a.png"}}, text("what?")]
    assert post(sim, req(messages=[user(*blocks)]))[0] == 200
    assert post(sim, req(messages=[user(image_block(png(8000, 4)), text("wide"))]))[0] == 200


def test_image_media_type(sim: SimAnthropic) -> None:
    bad(sim, req(messages=[user(image_block(png(), "image/bmp"))]),
        "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
        "'image/gif' or 'image/webp'", "image_source")
    bad(sim, req(messages=[user(image_block(png(), "image/jpeg"))]),
        "messages.0.content.0.image.source.base64: The image was specified using the image/jpeg media type, "
        "but the image appears to be a image/png image", "image_media_type_matches")


def test_image_over_5mb_counts_the_base64_string(sim: SimAnthropic) -> None:
    raw = png() + b"\0" * 3_950_000  # under 5 MB decoded, over 5 MB as base64
    assert len(raw) < MAX_IMAGE_BASE64_CHARS < len(base64.b64encode(raw))
    n = len(base64.b64encode(raw))
    bad(sim, req(messages=[user(image_block(raw))]),
        f"messages.0.content.0.image.source.base64: image exceeds 5 MB maximum: {n} bytes > 5242880 bytes",
        "image_size")


def test_image_dimensions(sim: SimAnthropic) -> None:
    bad(sim, req(messages=[user(image_block(png(8001, 2)))]),
        "messages.0.content.0.image.source.base64.data: At least one of the image dimensions exceed max allowed "
        "size: 8000 pixels", "image_dimensions")
    many = [image_block(png()) for _ in range(20)] + [image_block(png(2001, 2))]
    bad(sim, req(messages=[user(*many)]),
        "messages.0.content.20.image.source.base64.data: At least one of the image dimensions exceed max allowed "
        "size for many-image requests: 2000 pixels", "image_dimensions")
    assert post(sim, req(messages=[user(*[image_block(png()) for _ in range(20)], image_block(png(2001, 2)))]))[0] == 400


def test_image_inside_tool_result_is_checked(sim: SimAnthropic) -> None:
    result = {**TOOL_RESULT, "content": [image_block(png(9000, 2))]}
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [TOOL_USE]}, user(result)]
    bad(sim, req(messages=msgs, tools=[TOOL]),
        "messages.2.content.0.tool_result.content.0.image.source.base64.data: At least one of the image "
        "dimensions exceed max allowed size: 8000 pixels", "image_dimensions")


def test_too_many_images(sim: SimAnthropic) -> None:
    tiny = image_block(png(2, 2))
    bad(sim, req(messages=[user(*[tiny] * 101)]), "Too much media: 0 document pages + 101 images > 100", "image_count")
    assert post(sim, req(messages=[user(*[tiny] * 100)]))[0] == 200
    assert post(sim, req(model="claude-opus-4-6", messages=[user(*[tiny] * 101)]))[0] == 200  # 1M context: 600


# --- tools --------------------------------------------------------------------------------------
def test_tool_definitions(sim: SimAnthropic) -> None:
    bad(sim, req(tools=[{**TOOL, "name": "ns.search"}]),
        "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", "tools_shape")
    bad(sim, req(tools=[{**TOOL, "name": "a" * 129}]),
        "tools.0.custom.name: String should have at most 128 characters", "tools_shape")
    bad(sim, req(tools=[{**TOOL, "input_schema": {"type": "array"}}]),
        "tools.0.custom.input_schema.type: Input should be 'object'", "tools_shape")
    bad(sim, req(tools=[{**TOOL, "input_schema": {"type": "object", "anyOf": []}}]),
        "tools.0.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level",
        "tools_shape")
    bad(sim, req(tools=[{**TOOL, "parameters": {}}]), "tools.0.custom.parameters: Extra inputs are not permitted",
        "tools_shape")
    bad(sim, req(tools=[TOOL, TOOL]), "tools: Tool names must be unique.", "tool_names_unique")
    assert post(sim, req(tools=[{**TOOL, "name": "a" * 128}]))[0] == 200


def test_tool_choice(sim: SimAnthropic) -> None:
    bad(sim, req(tool_choice={"type": "any"}), "tool_choice may only be specified while providing tools.",
        "tool_choice_needs_tools")
    bad(sim, req(tools=[TOOL], tool_choice={"type": "required"}),
        "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'",
        "tool_choice_shape")
    bad(sim, req(tools=[TOOL], tool_choice={"type": "tool", "name": "respond"}),
        "tool_choice.tool.name: Tool 'respond' not found in tools", "tool_choice_names_a_tool")
    for choice in ({"type": "auto"}, {"type": "any"}, {"type": "none"}, {"type": "tool", "name": "search"}):
        assert post(sim, req(tools=[TOOL], tool_choice=choice))[0] == 200


# --- sampling and thinking ----------------------------------------------------------------------
def test_sampling(sim: SimAnthropic) -> None:
    bad(sim, req(temperature=1.5), "temperature: range: 0..1", "sampling_ranges")
    bad(sim, req(top_p=-0.1), "top_p: range: 0..1", "sampling_ranges")
    bad(sim, req(temperature=0.2, top_p=0.9),
        "`temperature` and `top_p` cannot both be specified for this model. Please use only one.",
        "temperature_with_top_p")
    assert post(sim, req(top_p=0.9))[0] == 200


def test_thinking(sim: SimAnthropic) -> None:
    think = {"type": "enabled", "budget_tokens": 2048}
    bad(sim, req(thinking={"type": "enabled", "budget_tokens": 1000}),
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024", "thinking_budget_minimum")
    bad(sim, req(thinking=think, max_tokens=2048),
        "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
        "thinking_budget_below_max_tokens")
    bad(sim, req(thinking=think, max_tokens=4096, temperature=0.5),
        "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking", "thinking_temperature")
    bad(sim, req(thinking=think, max_tokens=4096, top_k=5),
        "`top_k` must be unset when thinking is enabled. Please consult our documentation at "
        "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        "#important-considerations-when-using-extended-thinking", "thinking_top_k")
    code, _, body = post(sim, req(thinking=think, max_tokens=4096, top_p=0.5))
    assert code == 400 and body["error"]["message"].startswith("`top_p` must be between 0.95 and 1")
    bad(sim, req(thinking=think, max_tokens=4096, tools=[TOOL], tool_choice={"type": "any"}),
        "Thinking may not be enabled when tool_choice forces tool use.", "thinking_tool_choice")
    code, _, body = post(sim, req(thinking={"type": "adaptive"}))
    assert code == 400 and sim.refused[-1]["rule"] == "thinking_shape"


def test_thinking_accepted_with_thinking_block() -> None:
    with SimAnthropic(script=lambda body, n: {"kind": "text", "text": "42", "thinking": "hmm"}) as sim:
        think = {"type": "enabled", "budget_tokens": 2048}
        code, _, msg = post(sim, req(thinking=think, max_tokens=4096, top_p=0.95, tools=[TOOL],
                                     tool_choice={"type": "auto"}))
        assert code == 200
        assert [b["type"] for b in msg["content"]] == ["thinking", "text"] and msg["content"][0]["signature"]
        assert post(sim, req(model="claude-opus-4-6", thinking={"type": "adaptive"}))[0] == 200


# --- replies and injected failures --------------------------------------------------------------
def test_text_reply_is_a_message(sim: SimAnthropic) -> None:
    code, headers, msg = post(sim, req())
    assert code == 200 and headers["request-id"].startswith("req_")
    assert msg["id"].startswith("msg_") and msg["type"] == "message" and msg["role"] == "assistant"
    assert msg["model"] == MODEL and msg["content"] == [{"type": "text", "text": "ok"}]
    assert msg["stop_reason"] == "end_turn" and msg["stop_sequence"] is None
    assert {"input_tokens", "output_tokens"} <= set(msg["usage"])
    assert sim.requests[-1] == req() and sim.headers[-1]["x-api-key"] == "sk-ant-test"


@pytest.mark.parametrize(("status", "etype", "message"), [
    (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    (500, "api_error", "Internal server error"),
    (529, "overloaded_error", "Overloaded"),
])
def test_status_behaviours(status: int, etype: str, message: str) -> None:
    with SimAnthropic(script=lambda body, n: {"kind": "status", "status": status, "retry_after": "0.05"}) as sim:
        code, headers, body = post(sim, req())
        assert code == status and body["type"] == "error" and body["error"]["type"] == etype
        assert body["error"]["message"].startswith(message)
        assert headers["request-id"] == body["request_id"] and headers["retry-after"] == "0.05"


def test_429_always_carries_retry_after() -> None:
    with SimAnthropic(script=lambda body, n: {"kind": "status", "status": 429}) as sim:
        assert "retry-after" in post(sim, req())[1]


def test_slow_and_raw_behaviours() -> None:
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            return {"kind": "slow", "seconds": 0.2, "then": {"kind": "text", "text": "late"}}
        return {"kind": "raw", "body": "<html>bad gateway</html>", "status": 502, "content_type": "text/html"}

    with SimAnthropic(script=script) as sim:
        t0 = time.monotonic()
        code, _, msg = post(sim, req())
        assert code == 200 and msg["content"][0]["text"] == "late" and time.monotonic() - t0 >= 0.2
        code, _, page = post(sim, req())
        assert code == 502 and page == "<html>bad gateway</html>"


def test_streaming_events(sim: SimAnthropic) -> None:
    code, headers, stream = post(sim, req(stream=True))
    assert code == 200 and headers["content-type"] == "text/event-stream"
    events = [line[7:] for line in stream.splitlines() if line.startswith("event: ")]
    assert events == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                      "message_delta", "message_stop"]


def test_request_too_large(sim: SimAnthropic) -> None:
    big = req(messages=[user(text("x" * (33 * 1024 * 1024)))])
    code, _, body = post(sim, big)
    assert code == 413 and body == {"error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}}
    assert sim.refused[-1]["rule"] == "request_size"


def test_script_runs_only_for_accepted_requests() -> None:
    calls: list[int] = []
    with SimAnthropic(script=lambda body, n: calls.append(n) or {"kind": "text", "text": "ok"}) as sim:
        post(sim, req(max_tokens=...))
        post(sim, req())
        post(sim, req(model="nope"))
        post(sim, req())
        assert calls == [1, 2] and len(sim.refused) == 2 and len(sim.requests) == 4


def test_rules_are_a_named_registry() -> None:
    names = [name for name, _ in RULES]
    assert len(names) == len(set(names)) > 30
    assert "claude-sonnet-4-5" in DEFAULT_MODELS and "claude-3-5-haiku-20241022" not in DEFAULT_MODELS
    with pytest.raises(ValueError, match="no ModelSpec"):
        SimAnthropic(models={"claude-unheard-of"})


# --- the official SDK parses the bodies ---------------------------------------------------------
def test_sdk_errors_and_reply(sim: SimAnthropic) -> None:
    import anthropic
    client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as bad_request:
        client.post("/v1/messages", cast_to=anthropic.types.Message,
                    body={"model": SDK_MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert bad_request.value.status_code == 400
    assert bad_request.value.body["error"]["message"] == "max_tokens: Field required"  # type: ignore[index]
    assert "max_tokens: Field required" in str(bad_request.value)
    assert bad_request.value.request_id and bad_request.value.request_id.startswith("req_")
    with pytest.raises(anthropic.NotFoundError) as not_found:
        client.messages.create(model="claude-nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert "model: claude-nope" in str(not_found.value)
    # The SDK in this venv sends its key as a bearer token and API version 2026-10-21.
    assert sim.headers[-1]["authorization"] == "Bearer sk-ant-test" and sim.headers[-1]["anthropic-version"] == NEW
    reply = client.messages.create(model=SDK_MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert reply.content[0].type == "text" and reply.content[0].text == "ok" and reply.usage.output_tokens == 20


def test_sdk_tool_use_and_stream() -> None:
    import anthropic
    with SimAnthropic(script=lambda body, n: {"kind": "tool", "name": "search", "arguments": '{"q": "x"}'}) as sim:
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)
        kwargs: dict[str, Any] = {"model": SDK_MODEL, "max_tokens": 100, "tools": [TOOL],
                                  "tool_choice": {"type": "tool", "name": "search"},
                                  "messages": [{"role": "user", "content": "go"}]}
        reply = client.messages.create(**kwargs)
        assert reply.stop_reason == "tool_use" and reply.content[0].input == {"q": "x"}
        with client.messages.stream(**kwargs) as stream:
            final = stream.get_final_message()
        assert final.content[0].type == "tool_use" and final.content[0].input == {"q": "x"}
