"""The simulator's own tests: each rule broken once over raw HTTP (not through the project's
adapters), with the exact status, body shape and message; one valid request per profile; the
script's behaviours; and the official openai SDK reading the error bodies as it reads OpenAI's."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from sim_openai import GATE, PROFILE_RULES, SCHEMA_RULES, SimOpenAI, mask_key

PNG = base64.b64encode(base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")).decode()
GIF = base64.b64encode(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").decode()
MODEL = {"openai": "gpt-4o-mini", "gemini": "gemini-2.5-flash", "vllm": "Qwen/Qwen2.5-7B-Instruct",
         "ollama": "llama3.2", "llamacpp": "local"}
TOOL = {"type": "function", "function": {"name": "search", "description": "Search.",
                                          "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                         "required": ["q"]}}}


def post(sim: SimOpenAI, body: Any, *, key: str | None = "sk-test", raw: bytes | None = None,
         path: str = "/chat/completions") -> tuple[int, Any, dict[str, str]]:
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(sim.base_url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    if key is not None:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as err:
        text = err.read()
        return err.code, json.loads(text), dict(err.headers)


def chat(profile: str = "openai", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL[profile], "messages": [{"role": "user", "content": "Hello"}], **extra}


def image(url: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


def tool_turns(*, answered: list[str], calls: tuple[str, ...] = ("call_1",)) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": c, "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
                        for c in calls]}]
    msgs += [{"role": "tool", "tool_call_id": c, "content": "result"} for c in answered]
    return msgs


def openai_error(body: Any) -> dict[str, Any]:
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


def gemini_error(body: Any) -> dict[str, Any]:
    assert isinstance(body, list) and len(body) == 1 and set(body[0]) == {"error"}, body
    error = body[0]["error"]
    assert {"code", "message", "status"} <= set(error), error
    return error


def refused_once(sim: SimOpenAI, rule: str) -> None:
    assert [r["rule"] for r in sim.refused] == [rule]
    assert sim.accepted == []


def assert_completion(body: dict[str, Any], model: str) -> dict[str, Any]:
    assert body["object"] == "chat.completion" and body["model"] == model and body["id"]
    (choice,) = body["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    return choice


# --- accepted requests -------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["openai", "gemini", "vllm", "ollama", "llamacpp"])
def test_a_valid_request_is_answered_with_a_chat_completion(profile: str) -> None:
    with SimOpenAI(profile=profile, script=lambda b, n: {"kind": "text", "text": f"hi {n}"}) as sim:
        status, body, _ = post(sim, chat(profile))
        assert status == 200, body
        choice = assert_completion(body, MODEL[profile])
        assert choice["message"]["content"] == "hi 1" and choice["finish_reason"] == "stop"
        assert sim.refused == [] and sim.accepted == [chat(profile)] and sim.requests == [chat(profile)]


def test_base_urls() -> None:
    with SimOpenAI(profile="gemini") as gem, SimOpenAI(profile="ollama") as oll:
        assert gem.base_url.endswith("/v1beta/openai") and oll.base_url.endswith("/v1")
        assert gem.api_key == "sk-test" and oll.api_key is None
        status, body, _ = post(gem, chat("gemini"), path="/nope")
        assert status == 404


def test_a_tool_call_round_trip() -> None:
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            return {"kind": "tool", "name": "search", "arguments": '{"q": "x"}'}
        return {"kind": "text", "text": "done"}

    with SimOpenAI(script=script) as sim:
        status, body, _ = post(sim, chat(tools=[TOOL], tool_choice="auto"))
        choice = assert_completion(body, "gpt-4o-mini")
        assert status == 200 and choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["function"] == {"name": "search", "arguments": '{"q": "x"}'}
        msgs = [{"role": "user", "content": "find it"}, choice["message"],
                {"role": "tool", "tool_call_id": call["id"], "content": "result"}]
        status, body, _ = post(sim, {"model": "gpt-4o-mini", "messages": msgs, "tools": [TOOL]})
        assert status == 200 and body["choices"][0]["message"]["content"] == "done"


def test_reasoning_usage_and_text() -> None:
    with SimOpenAI(script=lambda b, n: {"kind": "text", "text": "4", "reasoning": "two and two" * 4}) as sim:
        status, body, _ = post(sim, chat(model="gpt-5-mini", max_completion_tokens=100, reasoning_effort="minimal"))
        assert status == 200
        assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 11
        assert "reasoning_content" not in body["choices"][0]["message"]
    with SimOpenAI(profile="vllm", script=lambda b, n: {"kind": "text", "text": "4", "reasoning": "r"}) as sim:
        status, body, _ = post(sim, chat("vllm"))
        assert body["choices"][0]["message"]["reasoning_content"] == "r"


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5-mini", "o3", "gpt-4.1", "gpt-4o"])
def test_max_completion_tokens_is_accepted_everywhere(model: str) -> None:
    with SimOpenAI() as sim:
        status, _, _ = post(sim, chat(model=model, max_completion_tokens=50))
        assert status == 200


def test_gpt5_defaults_and_effort_are_accepted() -> None:
    with SimOpenAI() as sim:
        for extra in ({"temperature": 1}, {"top_p": 1}, {"reasoning_effort": "minimal"}, {"reasoning_effort": "high"}):
            status, body, _ = post(sim, chat(model="gpt-5", **extra))
            assert status == 200, (extra, body)


# --- behaviours --------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["openai", "gemini", "vllm", "ollama", "llamacpp"])
@pytest.mark.parametrize("status", [429, 500, 503])
def test_status_behaviours_answer_in_the_services_shape(profile: str, status: int) -> None:
    script = lambda b, n: {"kind": "status", "status": status, "retry_after": "0.05"}  # noqa: E731
    with SimOpenAI(profile=profile, script=script) as sim:
        got, body, headers = post(sim, chat(profile))
        assert got == status and headers["Retry-After"] == "0.05"
        if profile == "openai":
            error = openai_error(body)
            assert error["type"] == ("requests" if status == 429 else "server_error")
            if status == 429:
                assert error["code"] == "rate_limit_exceeded"
        elif profile == "gemini":
            error = gemini_error(body)
            assert error["code"] == status
            assert error["status"] == {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[status]
        elif profile == "vllm":
            assert body["error"]["code"] == status and body["error"]["message"]
        elif profile == "ollama":
            assert body["error"]["type"] == "api_error"
        else:
            assert body["error"]["code"] == status
        assert sim.refused == [] and len(sim.accepted) == 1


def test_gemini_overloaded_message() -> None:
    with SimOpenAI(profile="gemini", script=lambda b, n: {"kind": "status", "status": 503}) as sim:
        _, body, headers = post(sim, chat("gemini"))
        assert gemini_error(body)["message"] == "The model is overloaded. Please try again later."
        assert "Retry-After" not in headers


def test_slow_and_raw_behaviours() -> None:
    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if n == 1:
            return {"kind": "slow", "seconds": 0.2, "then": {"kind": "text", "text": "late"}}
        return {"kind": "raw", "body": '{"not": "a completion"}', "status": 200}

    with SimOpenAI(script=script) as sim:
        start = time.monotonic()
        _, body, _ = post(sim, chat())
        assert time.monotonic() - start >= 0.2 and body["choices"][0]["message"]["content"] == "late"
        assert post(sim, chat())[1] == {"not": "a completion"}


def test_the_script_sees_only_accepted_requests() -> None:
    seen: list[int] = []

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        seen.append(n)
        return {"kind": "text", "text": "ok"}

    with SimOpenAI(script=script) as sim:
        post(sim, chat(model="gpt-5-mini", max_tokens=10))
        post(sim, chat())
        assert seen == [1] and len(sim.requests) == 2 and len(sim.refused) == 1


# --- authentication and models -----------------------------------------------------------------------


def test_openai_401_without_key() -> None:
    with SimOpenAI() as sim:
        status, body, _ = post(sim, chat(), key=None)
        error = openai_error(body)
        assert status == 401 and error["message"].startswith("You didn't provide an API key.")
        assert error["code"] is None
        refused_once(sim, "bearer_key")


def test_openai_401_masks_a_wrong_key() -> None:
    with SimOpenAI(api_key="sk-right") as sim:
        wrong = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
        status, body, _ = post(sim, chat(), key=wrong)
        error = openai_error(body)
        assert status == 401 and error["code"] == "invalid_api_key"
        assert error["message"] == (f"Incorrect API key provided: {mask_key(wrong)}. You can find your API key at "
                                    "https://platform.openai.com/account/api-keys.")
        assert wrong not in json.dumps(body) and mask_key(wrong).endswith("0123")
        assert "sk-test" not in mask_key("sk-test") and mask_key("sk-test").startswith("sk-te")


def test_gemini_key_errors() -> None:
    with SimOpenAI(profile="gemini") as sim:
        status, body, _ = post(sim, chat("gemini"), key=None)
        assert status == 403 and gemini_error(body)["status"] == "PERMISSION_DENIED"
        status, body, _ = post(sim, chat("gemini"), key="AIza-wrong")
        error = gemini_error(body)
        assert status == 400 and error["message"] == "API key not valid. Please pass a valid API key."
        assert error["details"][0]["reason"] == "API_KEY_INVALID"


def test_local_servers_with_a_key() -> None:
    with SimOpenAI(profile="vllm", api_key="secret") as sim:
        assert post(sim, chat("vllm"), key="nope")[:2] == (401, {"error": "Unauthorized"})
        assert post(sim, chat("vllm"), key="secret")[0] == 200
    with SimOpenAI(profile="llamacpp", api_key="secret") as sim:
        assert post(sim, chat("llamacpp"), key=None)[:2] == (
            401, {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}})
    with SimOpenAI(profile="ollama", api_key="whatever") as sim:  # Ollama takes any key, or none
        assert post(sim, chat("ollama"), key=None)[0] == 200


def test_404_model_not_found_per_profile() -> None:
    expected = {
        "openai": (lambda b: openai_error(b)["message"] == "The model `nope` does not exist or you do not have "
                                                           "access to it." and b["error"]["code"] == "model_not_found"),
        "gemini": (lambda b: gemini_error(b)["message"] == "models/nope is not found for API version v1main, or is "
                                                           "not supported for generateContent."),
        "vllm": (lambda b: b["error"] == {"message": "The model `nope` does not exist.", "type": "NotFoundError",
                                          "param": None, "code": 404}),
        "ollama": (lambda b: b["error"] == {"message": "model 'nope' not found", "type": "not_found_error",
                                            "param": None, "code": None}),
    }
    for profile, check in expected.items():
        with SimOpenAI(profile=profile) as sim:
            status, body, _ = post(sim, chat(profile, model="nope"))
            assert status == 404 and check(body), (profile, body)
            refused_once(sim, "model_served")
    with SimOpenAI(profile="llamacpp") as sim:  # llama-server serves what it loaded, whatever the name
        assert post(sim, chat("llamacpp", model="anything"))[0] == 200
        assert sim.ignored == [{"request": 0, "field": "model"}]


def test_models_can_be_given() -> None:
    with SimOpenAI(models={"my-model"}) as sim:
        assert post(sim, chat(model="my-model"))[0] == 200
        assert post(sim, chat(model="gpt-4o"))[0] == 404


# --- the OpenAI request schema -----------------------------------------------------------------------


def test_invalid_json() -> None:
    with SimOpenAI() as sim:
        status, body, _ = post(sim, None, raw=b"{not json")
        assert status == 400 and openai_error(body)["message"].startswith("We could not parse the JSON body")
        assert sim.refused[0]["rule"] == "json_body" and sim.requests == [{"_raw": "{not json"}]


def schema_case(body: dict[str, Any], rule: str, message: str, *, param: str | None = None,
                code: str | None = None, profile: str = "openai", status: int = 400) -> None:
    with SimOpenAI(profile=profile) as sim:
        got, resp, _ = post(sim, body)
        assert got == status, resp
        error = openai_error(resp)
        assert error == {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        refused_once(sim, rule)
        assert sim.refused[0]["request"] == body and sim.refused[0]["status"] == status


def test_model_present() -> None:
    schema_case({"messages": [{"role": "user", "content": "x"}]}, "model_present",
                "you must provide a model parameter")


def test_messages_present() -> None:
    schema_case({"model": "gpt-4o"}, "messages_present", "Missing required parameter: 'messages'.",
                param="messages", code="missing_required_parameter")
    schema_case({"model": "gpt-4o", "messages": []}, "messages_present",
                "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array "
                "instead.", param="messages", code="empty_array")


def test_message_roles() -> None:
    schema_case(chat(messages=[{"role": "bot", "content": "x"}]), "message_roles",
                "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and "
                "'developer'.", param="messages[0].role", code="invalid_value")


def test_tool_message_must_answer_the_previous_assistant() -> None:
    msgs = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_1", "content": "r"}]
    schema_case(chat(messages=msgs), "tool_message_answers_call",
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                "'tool_calls'.", param="messages.[1].role")
    # an id the assistant did not ask for
    schema_case(chat(messages=[*tool_turns(answered=["call_9"])]), "tool_message_answers_call",
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                "'tool_calls'.", param="messages.[2].role")


def test_every_tool_call_is_answered() -> None:
    msgs = [*tool_turns(answered=["call_1"], calls=("call_1", "call_2")), {"role": "user", "content": "and?"}]
    schema_case(chat(messages=msgs), "tool_calls_answered",
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                "'tool_call_id'. The following tool_call_ids did not have response messages: call_2",
                param="messages.[3].role")
    schema_case(chat(messages=tool_turns(answered=[], calls=("a", "b"))), "tool_calls_answered",
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                "'tool_call_id'. The following tool_call_ids did not have response messages: a, b", param="messages")


def test_answered_parallel_tool_calls_are_accepted() -> None:
    with SimOpenAI() as sim:
        assert post(sim, chat(messages=tool_turns(answered=["b", "a"], calls=("a", "b")), tools=[TOOL]))[0] == 200


def test_content_parts() -> None:
    msgs = [{"role": "user", "content": [{"type": "image", "data": PNG}]}]
    schema_case(chat(messages=msgs), "content_parts",
                "Invalid value: 'image'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', "
                "'audio', and 'file'.", param="messages[0].content[0].type", code="invalid_value")
    schema_case(chat(messages=[{"role": "user", "content": [{"type": "text"}]}]), "content_parts",
                "Missing required parameter: 'messages[0].content[0].text'.", param="messages[0].content[0].text",
                code="missing_required_parameter")


@pytest.mark.parametrize(("url", "tail"), [
    ("data:application/pdf;base64," + PNG, "unsupported MIME type 'application/pdf'."),
    ("data:image/png," + PNG, "a value without the ';base64' separator."),
    ("data:image/png;base64,@@@not-base64@@@", "an invalid base64-encoded value."),
    ("data:image/png;base64,", "empty base64-encoded bytes."),
    ("file:///tmp/x.png", "a value with an invalid format."),
])
def test_image_urls_must_be_well_formed_data_urls(url: str, tail: str) -> None:
    schema_case(chat(messages=image(url)), "image_urls",
                "Invalid image URL: 'messages[0].content[1].image_url.url'. Expected a base64-encoded data URL with "
                f"an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got {tail}",
                param="messages[0].content[1].image_url.url", code="invalid_value")


def test_image_bytes_must_be_an_image() -> None:
    not_image = base64.b64encode(b"%PDF-1.4 hello").decode()
    schema_case(chat(messages=image("data:image/png;base64," + not_image)), "image_urls",
                "You uploaded an unsupported image. Please make sure your image has of one the following formats: "
                "['png', 'jpeg', 'gif', 'webp'].", code="invalid_image_format")


def test_good_images_are_accepted() -> None:
    with SimOpenAI() as sim:
        for url in ("data:image/png;base64," + PNG, "data:image/gif;base64," + GIF, "https://example.com/a.png"):
            assert post(sim, chat(messages=image(url)))[0] == 200, url


def test_tool_definitions() -> None:
    def with_tool(name: str = "search", parameters: Any = None) -> dict[str, Any]:
        fn: dict[str, Any] = {"name": name}
        if parameters is not None:
            fn["parameters"] = parameters
        return chat(tools=[{"type": "function", "function": fn}])

    schema_case(with_tool("read file"), "tool_definitions",
                "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the "
                "pattern '^[a-zA-Z0-9_-]+$'.", param="tools[0].function.name", code="invalid_value")
    schema_case(with_tool("x" * 65), "tool_definitions",
                "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got "
                "a string with length 65 instead.", param="tools[0].function.name", code="string_above_max_length")
    schema_case(with_tool(parameters={"type": "string"}), "tool_definitions",
                "Invalid schema for function 'search': schema must be a JSON Schema of 'type: \"object\"', got "
                "'type: \"string\"'.", param="tools[0].function.parameters", code="invalid_function_parameters")
    schema_case(chat(tools=[{"type": "function"}]), "tool_definitions",
                "Missing required parameter: 'tools[0].function'.", param="tools[0].function",
                code="missing_required_parameter")


def test_tool_choice() -> None:
    schema_case(chat(tool_choice="auto"), "tool_choice_valid",
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                param="tool_choice")
    schema_case(chat(tools=[TOOL], tool_choice="any"), "tool_choice_valid",
                "Invalid value: 'any'. Supported values are: 'none', 'auto', and 'required'.", param="tool_choice",
                code="invalid_value")
    schema_case(chat(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "other"}}),
                "tool_choice_valid", "Invalid value for 'tool_choice': function 'other' is not one of 'tools'.",
                param="tool_choice.function.name", code="invalid_value")
    with SimOpenAI() as sim:
        for choice in ("none", "auto", "required", {"type": "function", "function": {"name": "search"}}):
            assert post(sim, chat(tools=[TOOL], tool_choice=choice))[0] == 200


def test_response_format() -> None:
    schema_case(chat(response_format={"type": "xml"}), "response_format_valid",
                "Invalid value: 'xml'. Supported values are: 'json_object', 'json_schema', and 'text'.",
                param="response_format.type", code="invalid_value")
    schema_case(chat(response_format={"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}),
                "response_format_valid", "Missing required parameter: 'response_format.json_schema.name'.",
                param="response_format.json_schema.name", code="missing_required_parameter")
    schema_case(chat(response_format={"type": "json_schema", "json_schema": {"name": "intent/1.0", "schema": {}}}),
                "response_format_valid", "Invalid 'response_format.json_schema.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                param="response_format.json_schema.name", code="invalid_value")


def test_schema_rules_answer_in_each_services_shape() -> None:
    orphan = chat(messages=[{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c", "content": "r"}])
    for profile in ("gemini", "vllm", "ollama", "llamacpp"):
        body = {**orphan, "model": MODEL[profile]}
        with SimOpenAI(profile=profile) as sim:
            status, resp, _ = post(sim, body)
            assert status == 400, (profile, resp)
            message = gemini_error(resp)["message"] if profile == "gemini" else resp["error"]["message"]
            assert message.startswith("Invalid parameter: messages with role 'tool' must be a response")
            refused_once(sim, "tool_message_answers_call")
        with SimOpenAI(profile=profile, schema_strict=False) as sim:  # the server itself takes it
            assert post(sim, body)[0] == 200


# --- OpenAI ------------------------------------------------------------------------------------------


def test_unknown_parameters() -> None:
    schema_case(chat(top_k=5), "unknown_parameters", "Unrecognized request argument supplied: top_k")


def test_max_tokens_on_reasoning_models() -> None:
    for model in ("gpt-5-mini", "o3", "o1"):
        schema_case(chat(model=model, max_tokens=100), "reasoning_max_tokens",
                    "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
                    "instead.", param="max_tokens", code="unsupported_parameter")
    with SimOpenAI() as sim:
        for model in ("gpt-4o", "gpt-4.1", "gpt-3.5-turbo"):
            assert post(sim, chat(model=model, max_tokens=100))[0] == 200


@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (0.2, "0.2"), (0.0, "0"), (1.5, "1.5")])
def test_temperature_on_reasoning_models(value: float, shown: str) -> None:
    schema_case(chat(model="gpt-5-mini", temperature=value), "reasoning_sampling",
                f"Unsupported value: 'temperature' does not support {shown} with this model. Only the default (1) "
                "value is supported.", param="temperature", code="unsupported_value")


def test_top_p_and_penalties_on_reasoning_models() -> None:
    schema_case(chat(model="o4-mini", top_p=0.9), "reasoning_sampling",
                "Unsupported parameter: 'top_p' is not supported with this model.", param="top_p",
                code="unsupported_parameter")
    schema_case(chat(model="gpt-5", presence_penalty=0.5), "reasoning_sampling",
                "Unsupported parameter: 'presence_penalty' is not supported with this model.",
                param="presence_penalty", code="unsupported_parameter")
    with SimOpenAI() as sim:
        assert post(sim, chat(model="gpt-4o", temperature=0, top_p=0.5))[0] == 200


def test_reasoning_effort() -> None:
    schema_case(chat(model="gpt-5", reasoning_effort="none"), "reasoning_effort_values",
                "Unsupported value: 'reasoning_effort' does not support 'none' with this model. Supported values are: "
                "'minimal', 'low', 'medium', and 'high'.", param="reasoning_effort", code="unsupported_value")
    schema_case(chat(model="o3", reasoning_effort="minimal"), "reasoning_effort_values",
                "Unsupported value: 'reasoning_effort' does not support 'minimal' with this model. Supported values "
                "are: 'low', 'medium', and 'high'.", param="reasoning_effort", code="unsupported_value")
    schema_case(chat(model="gpt-4o", reasoning_effort="low"), "reasoning_effort_values",
                "Unrecognized request argument supplied: reasoning_effort")
    with SimOpenAI(models={"gpt-5.1"}) as sim:
        assert post(sim, chat(model="gpt-5.1", reasoning_effort="none"))[0] == 200


def test_images_need_a_vision_model() -> None:
    schema_case(chat(model="gpt-3.5-turbo", messages=image("data:image/png;base64," + PNG)), "vision_support",
                "Invalid content type. image_url is only supported by certain models.",
                param="messages.[0].content.[1].type")


def test_image_count_limit() -> None:
    msgs = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}}
                                         for _ in range(3)]}]
    with SimOpenAI(max_images_per_request=2) as sim:
        status, body, _ = post(sim, chat(messages=msgs))
        assert status == 400 and openai_error(body)["message"] == "Too many images in request. Max is 2."
        refused_once(sim, "image_limits")
    with SimOpenAI(max_image_payload_bytes=100) as sim:
        status, body, _ = post(sim, chat(messages=msgs))
        assert status == 400 and "Max is 100 bytes" in openai_error(body)["message"]


def test_json_mode_needs_the_word_json() -> None:
    schema_case(chat(response_format={"type": "json_object"}), "json_object_needs_json_word",
                "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
                param="messages")
    with SimOpenAI() as sim:
        body = chat(response_format={"type": "json_object"}, messages=[{"role": "user", "content": "Answer in JSON."}])
        assert post(sim, body)[0] == 200


def test_strict_json_schema() -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    schema_case(chat(response_format={"type": "json_schema", "json_schema": {"name": "out", "strict": True,
                                                                             "schema": loose}}),
                "strict_json_schema", "Invalid schema for response_format 'out': In context=(), 'additionalProperties' "
                "is required to be supplied and to be false.", param="response_format")
    nested = {"type": "object", "additionalProperties": False, "required": ["orgs"],
              "properties": {"orgs": {"type": "array", "items": {
                  "type": "object", "additionalProperties": False, "required": ["name"],
                  "properties": {"name": {"type": "string"}, "roles": {"type": "string"}}}}}}
    schema_case(chat(response_format={"type": "json_schema", "json_schema": {"name": "out", "strict": True,
                                                                             "schema": nested}}),
                "strict_json_schema", "Invalid schema for response_format 'out': In context=('properties', 'orgs', "
                "'items'), 'required' is required to be supplied and to be an array including every key in "
                "properties. Missing 'roles'.", param="response_format")
    strict_tool = {"type": "function", "function": {"name": "glob", "strict": True, "parameters": loose}}
    schema_case(chat(tools=[strict_tool]), "strict_json_schema",
                "Invalid schema for function 'glob': In context=(), 'additionalProperties' is required to be supplied "
                "and to be false.", param="tools[0].function.parameters", code="invalid_function_parameters")
    with SimOpenAI() as sim:  # not strict: anything goes
        assert post(sim, chat(response_format={"type": "json_schema", "json_schema": {"name": "out",
                                                                                      "schema": loose}}))[0] == 200


# --- Gemini ------------------------------------------------------------------------------------------


def gemini_case(body: dict[str, Any], rule: str, message: str) -> dict[str, Any]:
    with SimOpenAI(profile="gemini") as sim:
        status, resp, _ = post(sim, body)
        error = gemini_error(resp)
        assert status == 400 and error["status"] == "INVALID_ARGUMENT" and error["message"] == message, resp
        refused_once(sim, rule)
        return error


def test_gemini_unknown_fields() -> None:
    error = gemini_case(chat("gemini", frequency_penalty=0.5, top_k=3), "gemini_unknown_fields",
                        'Invalid JSON payload received. Unknown name "frequency_penalty": Cannot find field.\n'
                        'Invalid JSON payload received. Unknown name "top_k": Cannot find field.')
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert len(error["details"][0]["fieldViolations"]) == 2
    gemini_case(chat("gemini", extra_body={"extra_body": {}}), "gemini_unknown_fields",
                "Invalid JSON payload received. Unknown name \"extra_body\" at 'extra_body': Cannot find field.")


def test_gemini_reasoning_effort_and_thinking_config_exclude_each_other() -> None:
    body = chat("gemini", reasoning_effort="low",
                extra_body={"google": {"thinking_config": {"thinking_budget": 800}}})
    gemini_case(body, "gemini_effort_or_thinking_config",
                "Expected one of either `reasoning_effort` or custom `thinking_config`; found both.")
    with SimOpenAI(profile="gemini") as sim:
        ok = chat("gemini", reasoning_effort="low", extra_body={"google": {"thinking_config": {"include_thoughts": True}}})
        assert post(sim, ok)[0] == 200
        assert post(sim, chat("gemini", extra_body={"google": {"thinking_config": {"thinking_budget": 800}}}))[0] == 200


def test_gemini_reasoning_effort_values() -> None:
    gemini_case(chat("gemini", model="gemini-2.5-pro", reasoning_effort="none"), "gemini_reasoning_effort",
                "Budget 0 is invalid. This model only works in thinking mode.")
    gemini_case(chat("gemini", reasoning_effort="xhigh"), "gemini_reasoning_effort",
                'Invalid value for reasoning_effort: "xhigh". Supported values are none, minimal, low, medium and high.')
    with SimOpenAI(profile="gemini") as sim:
        for effort in ("none", "minimal", "low", "medium", "high"):
            assert post(sim, chat("gemini", reasoning_effort=effort))[0] == 200


# --- vLLM --------------------------------------------------------------------------------------------


def vllm_case(body: dict[str, Any], rule: str, message: str, *, param: str | None = None, **sim_kwargs: Any) -> None:
    with SimOpenAI(profile="vllm", **sim_kwargs) as sim:
        status, resp, _ = post(sim, body)
        assert status == 400 and resp == {"error": {"message": message, "type": "BadRequestError", "param": param,
                                                    "code": 400}}, resp
        refused_once(sim, rule)


def test_vllm_auto_tool_choice_needs_the_flag() -> None:
    message = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    vllm_case(chat("vllm", tools=[TOOL], tool_choice="auto"), "vllm_auto_tool_choice", message)
    vllm_case(chat("vllm", tools=[TOOL]), "vllm_auto_tool_choice", message)  # "auto" is the default with tools
    with SimOpenAI(profile="vllm") as sim:
        named = {"type": "function", "function": {"name": "search"}}
        assert post(sim, chat("vllm", tools=[TOOL], tool_choice=named))[0] == 200
        assert post(sim, chat("vllm", tools=[TOOL], tool_choice="required"))[0] == 200
    with SimOpenAI(profile="vllm", auto_tool_choice=True) as sim:
        assert post(sim, chat("vllm", tools=[TOOL], tool_choice="auto"))[0] == 200


def test_vllm_tool_usage() -> None:
    vllm_case(chat("vllm", tools=[]), "vllm_tools_not_empty", "`tools` must not be an empty array. Either provide at "
              "least one tool or omit the field entirely.", param="tools")
    vllm_case(chat("vllm", tool_choice="required"), "vllm_tool_choice_requires_tools",
              "When using `tool_choice`, `tools` must be set.", param="tool_choice")
    vllm_case(chat("vllm", tools=[TOOL], tool_choice={"type": "function", "function": {"name": "x"}}),
              "vllm_tool_choice_requires_tools",
              "The tool specified in `tool_choice` does not match any of the specified `tools`", param="tool_choice")


def test_vllm_context_length() -> None:
    body = chat("vllm", messages=[{"role": "user", "content": "x" * 400}], max_tokens=900)
    prompt = len(json.dumps(body["messages"])) // 4
    vllm_case(body, "vllm_context_length",
              f"This model's maximum context length is 1000 tokens. However, you requested {prompt + 900} tokens "
              f"({prompt} in the messages, 900 in the completion). Please reduce the length of the messages or "
              "completion.", context_length=1000)
    with SimOpenAI(profile="vllm", context_length=1000) as sim:
        assert post(sim, {**body, "max_tokens": 800})[0] == 200
        assert post(sim, {**body, "max_tokens": None, "max_completion_tokens": 901})[0] == 400


def test_vllm_ignores_unknown_fields() -> None:
    with SimOpenAI(profile="vllm") as sim:
        assert post(sim, chat("vllm", frobnicate=20, best_of_luck=1.1))[0] == 200
        assert sim.ignored == [{"request": 0, "field": "frobnicate"}, {"request": 0, "field": "best_of_luck"}]


def test_vllm_reads_its_extra_sampling_parameters() -> None:
    """top_k and repetition_penalty are vLLM's documented extra parameters: read, not ignored; top_k an integer."""
    with SimOpenAI(profile="vllm") as sim:
        assert post(sim, chat("vllm", top_k=20, repetition_penalty=1.1))[0] == 200
        assert sim.ignored == []
        status, resp, _ = post(sim, chat("vllm", top_k=2.5))
        assert status == 400 and resp["error"]["param"] == "top_k"


# --- Ollama ------------------------------------------------------------------------------------------


def ollama_case(body: dict[str, Any], rule: str, message: str, **sim_kwargs: Any) -> None:
    with SimOpenAI(profile="ollama", **sim_kwargs) as sim:
        status, resp, _ = post(sim, body)
        assert status == 400 and resp == {"error": {"message": message, "type": "invalid_request_error",
                                                    "param": None, "code": None}}, resp
        refused_once(sim, rule)


def test_ollama_images() -> None:
    vl = {"model": "qwen2.5vl"}
    ollama_case({**chat("ollama", messages=image("https://example.com/a.png")), **vl}, "ollama_image_input",
                "image URLs are not currently supported, please use base64 encoded data instead")
    ollama_case({**chat("ollama", messages=image("data:image/gif;base64," + GIF)), **vl}, "ollama_image_input",
                "invalid image input")
    ollama_case(chat("ollama", messages=image("data:image/png;base64," + PNG)), "ollama_vision",
                "this model does not support image input")
    with SimOpenAI(profile="ollama") as sim:
        assert post(sim, {**chat("ollama", messages=image("data:image/png;base64," + PNG)), **vl})[0] == 200


def test_ollama_tools_reasoning_and_messages() -> None:
    ollama_case(chat("ollama", tools=[TOOL]), "ollama_tools_support",
                "registry.ollama.ai/library/llama3.2:latest does not support tools", tool_models={"qwen2.5vl"})
    ollama_case(chat("ollama", reasoning_effort="extreme"), "ollama_reasoning_effort",
                'invalid reasoning value: "extreme" (must be "minimal", "low", "medium", "high", "xhigh", "ultra", '
                '"max", or "none")')
    ollama_case(chat("ollama", messages=[]), "ollama_messages_not_empty", "[] is too short - 'messages'")
    ollama_case(chat("ollama", messages=[{"role": "user", "content": None}]), "ollama_message_content",
                "invalid message content type: <nil>")
    bad_args = tool_turns(answered=["call_1"])
    bad_args[1]["tool_calls"][0]["function"]["arguments"] = "{not json"
    ollama_case(chat("ollama", messages=bad_args, tools=[TOOL]), "ollama_message_content",
                "invalid tool call arguments")


def test_ollama_ignores_what_it_does_not_support() -> None:
    with SimOpenAI(profile="ollama") as sim:
        status, _, _ = post(sim, chat("ollama", tools=[TOOL], tool_choice="required", n=2, user="u"))
        assert status == 200
        assert [i["field"] for i in sim.ignored] == ["tool_choice", "n", "user"]


# --- llama.cpp ---------------------------------------------------------------------------------------


def test_llamacpp_tools_need_jinja() -> None:
    with SimOpenAI(profile="llamacpp", jinja=False) as sim:
        status, body, _ = post(sim, chat("llamacpp", tools=[TOOL]))
        assert (status, body) == (500, {"error": {"code": 500, "message": "tools param requires --jinja flag",
                                                  "type": "server_error"}})
        status, body, _ = post(sim, chat("llamacpp", tool_choice="none"))
        assert (status, body["error"]["message"]) == (500, "tool_choice param requires --jinja flag")
        assert [r["rule"] for r in sim.refused] == ["llamacpp_jinja", "llamacpp_jinja"]
    with SimOpenAI(profile="llamacpp") as sim:  # --jinja is the default
        assert post(sim, chat("llamacpp", tools=[TOOL]))[0] == 200


def test_llamacpp_response_format_and_messages() -> None:
    with SimOpenAI(profile="llamacpp", schema_strict=False) as sim:
        status, body, _ = post(sim, chat("llamacpp", response_format={"type": "grammar"}))
        assert (status, body["error"]) == (400, {
            "code": 400, "message": 'response_format type must be one of "text" or "json_object", but got: grammar',
            "type": "invalid_request_error"})
        status, body, _ = post(sim, chat("llamacpp", messages=[{"role": "user"}]))
        assert (status, body["error"]["message"]) == (400, "All non-assistant messages must contain 'content'")
        status, body, _ = post(sim, chat("llamacpp", messages=[{"role": "user", "content": "x"}, {"role": "assistant"}]))
        assert (status, body["error"]["message"]) == (400, "Assistant message must contain either 'content' or "
                                                           "'tool_calls'!")
        status, body, _ = post(sim, chat("llamacpp", top_logprobs=3))
        assert (status, body["error"]["message"]) == (400, "top_logprobs requires logprobs to be set to true")
        assert [r["rule"] for r in sim.refused] == ["llamacpp_response_format"] + ["llamacpp_message_content"] * 3
    with SimOpenAI(profile="llamacpp") as sim:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}}
        assert post(sim, chat("llamacpp", response_format={"type": "json_object", "schema": schema}))[0] == 200
        assert post(sim, chat("llamacpp", response_format={"type": "json_schema",
                                                           "json_schema": {"name": "r", "schema": schema}}))[0] == 200
        assert post(sim, chat("llamacpp", messages=tool_turns(answered=["call_1"]), tools=[TOOL]))[0] == 200


def test_llamacpp_images_need_mmproj() -> None:
    body = chat("llamacpp", messages=image("data:image/png;base64," + PNG))
    with SimOpenAI(profile="llamacpp") as sim:
        status, resp, _ = post(sim, body)
        assert (status, resp["error"]) == (500, {
            "code": 500, "message": "image input is not supported - hint: if this is unexpected, you may need to "
                                    "provide the mmproj", "type": "server_error"})
        refused_once(sim, "llamacpp_image_input")
    with SimOpenAI(profile="llamacpp", mmproj=True) as sim:
        assert post(sim, body)[0] == 200


def test_llama_cpp_python_refuses_null_assistant_content() -> None:
    body = chat("llamacpp", messages=tool_turns(answered=["call_1"]), tools=[TOOL])
    with SimOpenAI(profile="llamacpp", server="llama-cpp-python") as sim:
        status, resp, _ = post(sim, body)
        assert status == 500 and resp["error"]["type"] == "internal_server_error"
        assert "Input should be a valid string" in resp["error"]["message"]
        assert resp["error"]["param"] is None and resp["error"]["code"] is None
        refused_once(sim, "llamacpp_python_null_content")
        body["messages"][1]["content"] = ""
        assert post(sim, body)[0] == 200
    with SimOpenAI(profile="llamacpp", server="llama-cpp-python", api_key="k") as sim:
        assert post(sim, chat("llamacpp"), key="x")[:2] == (401, {"detail": "Invalid API key"})


# --- the official SDK reads the bodies ---------------------------------------------------------------


def test_the_openai_sdk_raises_what_it_raises_for_openai() -> None:
    openai = pytest.importorskip("openai")
    with SimOpenAI() as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.BadRequestError) as bad:
            client.chat.completions.create(model="gpt-5-mini", max_tokens=10,
                                           messages=[{"role": "user", "content": "hi"}])
        assert bad.value.status_code == 400 and bad.value.code == "unsupported_parameter"
        assert bad.value.param == "max_tokens"
        assert bad.value.message == ("Error code: 400 - Unsupported parameter: 'max_tokens' is not supported with "
                                     "this model. Use 'max_completion_tokens' instead.")
        assert bad.value.body == sim.refused[0]["body"]["error"]
        assert "Use 'max_completion_tokens' instead." in str(bad.value)
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
        assert missing.value.code == "model_not_found"
        assert "The model `gpt-9` does not exist or you do not have access to it." in str(missing.value)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=sim.base_url, api_key="sk-wrong", max_retries=0).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError):
            sim.script = lambda b, n: {"kind": "status", "status": 429}
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        sim.script = lambda b, n: {"kind": "text", "text": "fine"}
        reply = client.chat.completions.create(model="gpt-5-mini", max_completion_tokens=10,
                                               messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "fine"
        assert reply.usage.completion_tokens_details.reasoning_tokens == 0


def test_the_openai_sdk_with_geminis_list_shaped_errors() -> None:
    openai = pytest.importorskip("openai")
    with SimOpenAI(profile="gemini") as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="gemini-9", messages=[{"role": "user", "content": "hi"}])
        # The SDK reads only a dict body's message: with Gemini's list the text stays in .body alone,
        # as it does against the real endpoint.
        assert str(missing.value) == "Error code: 404"
        assert missing.value.body == sim.refused[0]["body"]
        assert "models/gemini-9 is not found" in missing.value.body[0]["error"]["message"]
        reply = client.chat.completions.create(model="gemini-2.5-flash", reasoning_effort="low",
                                               messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "ok"


# --- the rules themselves ----------------------------------------------------------------------------


def test_every_rule_says_where_it_comes_from() -> None:
    rules = {*GATE, *SCHEMA_RULES, *(r for rs in PROFILE_RULES.values() for r in rs)}
    for rule in rules:
        doc = rule.__doc__ or ""
        assert doc.strip(), rule.__name__
    assert len({r.__name__ for r in rules}) == len(rules)
