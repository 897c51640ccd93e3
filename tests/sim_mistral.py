"""A strict local simulator of Mistral's chat completions API (POST /v1/chat/completions), for the tests.

A fake server that accepts what the real service refuses proves nothing. Every request passes the
rules below before the test's script is asked for a reply; each rule names its source and the
error text, quoted from the source or from a real API answer pasted into a public issue. Where no
text could be found the comment says "text not found" and the message is written in the API's own
shape; tests must not pin those texts. Only the script's answer is made up.

Sources (cited by short name):
  OAS      github.com/mistralai/platform-docs-public openapi.yaml @222f4ba (2026-08-21):
           ChatCompletionRequest (additionalProperties: false), SystemMessage, UserMessage,
           AssistantMessage, ToolMessage, ContentChunk, TextChunk, ImageURLChunk, ImageURL,
           ImageDetail (low|auto|high), Tool, Function, ToolChoice, ToolChoiceEnum
           (auto|none|any|required), ResponseFormat, JsonSchema, the 422 HTTPValidationError
  SDK      github.com/mistralai/client-python @05629d2 (2026-06-30) src/mistralai/client/models
  COMMON   github.com/mistralai/mistral-common @bc022b9 (2026-07-23)
           src/mistral_common/protocol/instruct/validator.py (MistralRequestValidator, V3..V15):
           the message-structure checks the API answers with 400
  ERRORS   docs error glossary, public/resources/error-glossary.md (statuses; body
           {"object": "error", "message", "type", "param", "code"})
  VISION   public/studio-api/conversations/vision.md FAQ: PNG, JPEG, WEBP, single-frame GIF; "The
           current file size limit is 10Mb"; "The maximum number images per request via API is 8";
           "An error will be sent if the resolution is higher than 10000x10000"

Observed answers of api.mistral.ai quoted below:
  422 {"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],
      "msg":"Extra inputs are not permitted","input":32000}]},"type":"invalid_request_error","param":null,
      "code":null}                                    (editor-code-assistant/eca#231, 2025-12-12)
      per-message fields: loc ["body","messages",0,"user","name"]   (Gage-Technologies/mistral-go#3, 2024-04)
  400 {"object":"error","message":"Unexpected role 'user' after role 'tool'","type":
      "invalid_request_message_order","param":null,"code":"3230"}   (datapizza-labs/datapizza-ai#98, 2025-12-04;
      avante.nvim#2562 2025-08; litellm#17761 2025-12)
  400 "Unexpected role 'tool' after role 'user'" (same type and code; mistral-vibe#1114, 2026-09-19)
  400 {"object":"error","message":"Tool call id was turn1_0 but must be a-z, A-Z, 0-9, with a length of 9.",
      "type":"invalid_function_call","param":null,"code":"3280","raw_status_code":400} (nearai/ironclaw#1241, 2026-03)
  400 {"object":"error","message":"Not the same number of function calls and responses","type":
      "invalid_request_error","param":null,"code":null}  (camel-ai/camel#1467 2025-01, mistralai/client-ts#106 2025-06)
  400 "Assistant message must have either content or tool_calls, but not none." (invalid_request_error;
      solbrowse/extension#16 2025-06, OpenHands#8685 2025-05)
  400 "Expected last role User or Tool (or Assistant with prefix True) for serving but got assistant"
      (code 3230; anomalyco/opencode#19115, 2026-03)
  400 {"object":"error","message":"Invalid model: mistral-medium-3.5","type":"invalid_model","param":null,
      "code":"1500","raw_status_code":400}            (mistralai/mistral-vibe#617, 2026-04-21)
  401 {"detail":"Unauthorized"}                       (agent0ai/agent-zero#539 2025-06, nextcloud/integration_openai#332 2026-01)
  429 {"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300",
      "raw_status_code":429}                          (raycast/extensions#31107 2026-09, cline/cline#9085 2026-02)

The role order after tool results: the hosted API refused a user message right after tool results
through 2025-12 (quotes above); mistral-common allowed it from 2026-04-27 (commit cdd334b "Allow user
after tool"), and no answer of the hosted API since shows either way. `user_after_tool=False` (the
default) keeps the refusal; True models the relaxed validator.

    with SimMistral(script=lambda body, n: {"kind": "text", "text": "hi"}) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key=sim.api_key, max_retries=0)
"""

from __future__ import annotations

import io
import json
import random
import re
import string
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from http_double import LocalJsonServer, Response, ServedDouble, b64decode_strict

Behaviour = dict[str, Any]
"""What the script answers for an accepted request:
{"kind": "text", "text": str}
| {"kind": "tool", "name": str, "arguments": str}                  (FakeOpenAI's form: one call)
| {"kind": "tools", "calls": [{"name", "arguments"}, ...], "text"?: str}  (several calls, text beside)
| {"kind": "status", "status": 429 | 500 | 503, "retry_after"?: str, "message"?: str}
| {"kind": "slow", "seconds": float, "then": Behaviour}
| {"kind": "raw", "body": str, "status"?: int, "content_type"?: str}
Optional on text/tool/tools: "prompt_tokens", "completion_tokens"."""

Refusal = tuple[int, Any]

DEFAULT_MODELS = {"pixtral-large-latest", "pixtral-large-2411", "mistral-large-latest", "mistral-medium-latest",
                  "mistral-small-latest", "codestral-latest"}
TEXT_ONLY = {"codestral-latest"}  # the models pages: Codestral takes no images

# OAS ChatCompletionRequest.properties
REQUEST_FIELDS = frozenset({
    "model", "temperature", "top_p", "max_tokens", "stream", "stop", "random_seed", "metadata", "messages",
    "response_format", "tools", "tool_choice", "presence_penalty", "frequency_penalty", "n", "prediction",
    "parallel_tool_calls", "prompt_mode", "reasoning_effort", "guardrails", "prompt_cache_key", "safe_prompt",
})
# OAS message schemas (each additionalProperties: false), by role (the discriminator)
MESSAGE_FIELDS = {
    "system": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "prefix"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
}
CHUNK_TYPES = ("text", "image_url", "document_url", "reference", "file", "thinking", "input_audio")  # OAS ContentChunk
TOOL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")  # COMMON MistralRequestValidatorV3
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # COMMON _validate_function / _validate_function_call
MAX_IMAGES = 8  # VISION
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # VISION "10Mb"
MAX_RESOLUTION = 10000  # VISION


def error_body(message: Any, type: str = "invalid_request_error", code: str | None = None, *,
               status: int | None = None) -> dict[str, Any]:
    """Mistral's error body (ERRORS): {"object": "error", "message", "type", "param", "code"}; answers
    observed from 2026 also carry "raw_status_code" (ironclaw#1241, mistral-vibe#617, raycast#31107)."""
    body: dict[str, Any] = {"object": "error", "message": message, "type": type, "param": None, "code": code}
    if status is not None:
        body["raw_status_code"] = status
    return body


def order_error(message: str) -> Refusal:
    """COMMON InvalidMessageStructureException as the hosted API answers it (observed, 400, code 3230)."""
    return 400, error_body(message, "invalid_request_message_order", "3230")


def _loc_error(kind: str, loc: list[Any], msg: str, value: Any) -> dict[str, Any]:
    """One pydantic error of a 422 detail list (observed shape: type, loc, msg, input)."""
    return {"type": kind, "loc": loc, "msg": msg, "input": value}


# --- the request schema (422) ------------------------------------------------------------------------
# FastAPI/pydantic validation of OAS ChatCompletionRequest: every violation in one detail list.
# extra_forbidden ("Extra inputs are not permitted") is observed verbatim; the other types and texts
# are pydantic 2's standard ones (missing "Field required", literal_error "Input should be ...",
# less_than_equal "Input should be less than or equal to 1.5", ...), not captured from the API.


def _schema_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    for key in body:
        if key not in REQUEST_FIELDS:
            errors.append(_loc_error("extra_forbidden", ["body", key], "Extra inputs are not permitted", body[key]))
    for key in ("model", "messages"):
        if key not in body:
            errors.append(_loc_error("missing", ["body", key], "Field required", body))
    if "model" in body and not isinstance(body["model"], str):
        errors.append(_loc_error("string_type", ["body", "model"], "Input should be a valid string", body["model"]))
    messages = body.get("messages")
    if "messages" in body and not isinstance(messages, list):
        errors.append(_loc_error("list_type", ["body", "messages"], "Input should be a valid list", messages))
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        errors += _message_errors(i, message)
    errors += _range_errors(body)
    if (tools := body.get("tools")) is not None:
        if not isinstance(tools, list):
            errors.append(_loc_error("list_type", ["body", "tools"], "Input should be a valid list", tools))
        else:
            for k, tool in enumerate(tools):
                errors += _tool_errors(k, tool)
    if "tool_choice" in body:
        errors += _tool_choice_errors(body["tool_choice"])
    if "response_format" in body:
        errors += _response_format_errors(body["response_format"])
    return errors


def _message_errors(i: int, message: Any) -> list[dict[str, Any]]:
    where = ["body", "messages", i]
    if not isinstance(message, dict):
        return [_loc_error("model_attributes_type", where, "Input should be a valid dictionary or object to extract "
                                                          "fields from", message)]
    role = message.get("role")
    if role not in MESSAGE_FIELDS:
        return [_loc_error("union_tag_invalid", where, f"Input tag '{role}' found using 'role' does not match any of "
                                                       "the expected tags: 'system', 'user', 'assistant', 'tool'",
                           message)]
    where = [*where, role]
    errors = [_loc_error("extra_forbidden", [*where, k], "Extra inputs are not permitted", v)
              for k, v in message.items() if k not in MESSAGE_FIELDS[role]]
    if role != "assistant" and "content" not in message:
        errors.append(_loc_error("missing", [*where, "content"], "Field required", message))
    content = message.get("content")
    if role == "system" and content is None and "content" in message:
        errors.append(_loc_error("string_type", [*where, "content", "str"], "Input should be a valid string", None))
    if isinstance(content, list):
        for j, chunk in enumerate(content):
            errors += _chunk_errors([*where, "content", "list", j], chunk)
    elif content is not None and not isinstance(content, str):
        errors.append(_loc_error("string_type", [*where, "content", "str"], "Input should be a valid string", content))
    if role == "assistant":
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            errors.append(_loc_error("list_type", [*where, "tool_calls"], "Input should be a valid list", calls))
        for k, call in enumerate(calls if isinstance(calls, list) else []):
            errors += _tool_call_errors([*where, "tool_calls", k], call)
    return errors


def _chunk_errors(where: list[Any], chunk: Any) -> list[dict[str, Any]]:
    """OAS ContentChunk: discriminated by "type"; TextChunk {type, text}, ImageURLChunk {type, image_url:
    ImageURL {url, detail?: low|auto|high} | str}, each additionalProperties: false."""
    if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        tags = ", ".join(f"'{t}'" for t in CHUNK_TYPES)
        return [_loc_error("union_tag_invalid", where, f"Input tag '{kind}' found using 'type' does not match any of "
                                                       f"the expected tags: {tags}", chunk)]
    kind = chunk["type"]
    where = [*where, kind]
    if kind == "text":
        errors = [_loc_error("extra_forbidden", [*where, k], "Extra inputs are not permitted", v)
                  for k, v in chunk.items() if k not in ("type", "text")]
        if not isinstance(chunk.get("text"), str):
            errors.append(_loc_error("missing" if "text" not in chunk else "string_type", [*where, "text"],
                                     "Field required" if "text" not in chunk else "Input should be a valid string",
                                     chunk.get("text")))
        return errors
    if kind != "image_url":
        return []  # the other chunk kinds are not used by deskbench; their fields are not modelled
    errors = [_loc_error("extra_forbidden", [*where, k], "Extra inputs are not permitted", v)
              for k, v in chunk.items() if k not in ("type", "image_url")]
    value = chunk.get("image_url")
    if isinstance(value, dict):
        errors += [_loc_error("extra_forbidden", [*where, "image_url", "ImageURL", k], "Extra inputs are not permitted", v)
                   for k, v in value.items() if k not in ("url", "detail")]
        if not isinstance(value.get("url"), str):
            errors.append(_loc_error("missing", [*where, "image_url", "ImageURL", "url"], "Field required", value))
        detail = value.get("detail")
        if detail is not None and detail not in ("low", "auto", "high"):
            errors.append(_loc_error("enum", [*where, "image_url", "ImageURL", "detail"],
                                     "Input should be 'low', 'auto' or 'high'", detail))
    elif not isinstance(value, str):
        errors.append(_loc_error("missing", [*where, "image_url"], "Field required", chunk))
    return errors


def _tool_call_errors(where: list[Any], call: Any) -> list[dict[str, Any]]:
    """OAS ToolCall {id?, type?: "function", function: FunctionCall {name, arguments: object | str}, index?}."""
    if not isinstance(call, dict):
        return [_loc_error("model_attributes_type", where, "Input should be a valid dictionary", call)]
    errors = [_loc_error("extra_forbidden", [*where, k], "Extra inputs are not permitted", v)
              for k, v in call.items() if k not in ("id", "type", "function", "index")]
    if call.get("type", "function") != "function":
        errors.append(_loc_error("enum", [*where, "type"], "Input should be 'function'", call.get("type")))
    fn = call.get("function")
    if not isinstance(fn, dict):
        return [*errors, _loc_error("missing", [*where, "function"], "Field required", call)]
    errors += [_loc_error("extra_forbidden", [*where, "function", k], "Extra inputs are not permitted", v)
               for k, v in fn.items() if k not in ("name", "arguments")]
    for key in ("name", "arguments"):
        if key not in fn:
            errors.append(_loc_error("missing", [*where, "function", key], "Field required", fn))
    return errors


def _range_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    """OAS bounds: temperature 0..1.5, top_p 0..1, max_tokens >= 0, random_seed >= 0, n >= 1,
    presence/frequency_penalty -2..2; reasoning_effort "high" | "none"."""
    errors = []
    bounds = {"temperature": (0, 1.5), "top_p": (0, 1), "presence_penalty": (-2, 2), "frequency_penalty": (-2, 2),
              "max_tokens": (0, None), "random_seed": (0, None), "n": (1, None)}
    for key, (low, high) in bounds.items():
        value = body.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value < low:
            errors.append(_loc_error("greater_than_equal", ["body", key], f"Input should be greater than or equal to "
                                                                          f"{low}", value))
        elif high is not None and value > high:
            errors.append(_loc_error("less_than_equal", ["body", key], f"Input should be less than or equal to {high}",
                                     value))
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in ("high", "none"):
        errors.append(_loc_error("enum", ["body", "reasoning_effort"], "Input should be 'high' or 'none'", effort))
    return errors


def _tool_errors(k: int, tool: Any) -> list[dict[str, Any]]:
    """OAS Tool {type?: "function", function: Function {name, description?, strict?, parameters (required,
    an object)}}, additionalProperties: false on both."""
    where = ["body", "tools", k]
    if not isinstance(tool, dict):
        return [_loc_error("model_attributes_type", where, "Input should be a valid dictionary", tool)]
    errors = [_loc_error("extra_forbidden", [*where, key], "Extra inputs are not permitted", v)
              for key, v in tool.items() if key not in ("type", "function")]
    fn = tool.get("function")
    if not isinstance(fn, dict):
        return [*errors, _loc_error("missing", [*where, "function"], "Field required", tool)]
    errors += [_loc_error("extra_forbidden", [*where, "function", key], "Extra inputs are not permitted", v)
               for key, v in fn.items() if key not in ("name", "description", "strict", "parameters")]
    for key in ("name", "parameters"):
        if key not in fn:
            errors.append(_loc_error("missing", [*where, "function", key], "Field required", fn))
    if "parameters" in fn and not isinstance(fn["parameters"], dict):
        errors.append(_loc_error("dict_type", [*where, "function", "parameters"], "Input should be a valid dictionary",
                                 fn["parameters"]))
    return errors


def _tool_choice_errors(choice: Any) -> list[dict[str, Any]]:
    """OAS tool_choice: ToolChoice {type?: "function", function: {name}} | "auto" | "none" | "any" | "required"."""
    if isinstance(choice, str):
        if choice in ("auto", "none", "any", "required"):
            return []
        return [_loc_error("enum", ["body", "tool_choice", "ToolChoiceEnum"],
                           "Input should be 'auto', 'none', 'any' or 'required'", choice)]
    fn = choice.get("function") if isinstance(choice, dict) else None
    if (isinstance(choice, dict) and isinstance(fn, dict) and isinstance(fn.get("name"), str)
            and set(choice) <= {"type", "function"} and set(fn) == {"name"} and choice.get("type", "function") == "function"):
        return []
    return [_loc_error("model_type", ["body", "tool_choice", "ToolChoice"],
                       "Input should be a valid dictionary or instance of ToolChoice", choice)]


def _response_format_errors(rf: Any) -> list[dict[str, Any]]:
    """OAS ResponseFormat {type?: text|json_object|json_schema, json_schema?: JsonSchema {name, schema,
    description?, strict?}}."""
    where = ["body", "response_format"]
    if not isinstance(rf, dict):
        return [_loc_error("model_type", where, "Input should be a valid dictionary", rf)]
    errors = [_loc_error("extra_forbidden", [*where, k], "Extra inputs are not permitted", v)
              for k, v in rf.items() if k not in ("type", "json_schema")]
    if rf.get("type", "text") not in ("text", "json_object", "json_schema"):
        errors.append(_loc_error("enum", [*where, "type"], "Input should be 'text', 'json_object' or 'json_schema'",
                                 rf.get("type")))
    js = rf.get("json_schema")
    if isinstance(js, dict):
        errors += [_loc_error("extra_forbidden", [*where, "json_schema", k], "Extra inputs are not permitted", v)
                   for k, v in js.items() if k not in ("name", "schema", "description", "strict")]
        for key in ("name", "schema"):
            if key not in js:
                errors.append(_loc_error("missing", [*where, "json_schema", key], "Field required", js))
    return errors


# --- the request as the rules after the schema see it -----------------------------------------------


@dataclass
class Req:
    sim: SimMistral
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    def images(self) -> Iterator[tuple[int, int, str]]:
        for i, m in enumerate(self.messages):
            if isinstance(m.get("content"), list):
                for j, chunk in enumerate(m["content"]):
                    if chunk.get("type") == "image_url":
                        value = chunk.get("image_url")
                        yield i, j, value.get("url", "") if isinstance(value, dict) else str(value)


Rule = Callable[[Req], Refusal | None]


def bearer_key(req: Req) -> Refusal | None:
    """ERRORS 401 "The API key is missing, invalid, or expired" ("Authorization: Bearer YOUR_API_KEY").
    Observed body for chat/completions: {"detail":"Unauthorized"} (agent-zero#539; an earlier form was
    {"message":"Unauthorized","request_id":"..."}, cline#1734, 2025-02)."""
    auth = req.headers.get("authorization", "")
    if auth.lower().startswith("bearer ") and auth[7:] == req.sim.api_key:
        return None
    return 401, {"detail": "Unauthorized"}


def model_served(req: Req) -> Refusal | None:
    """An unknown model: 400 "Invalid model: X", type invalid_model, code "1500" (observed, mistral-vibe#617)."""
    if req.body.get("model") in req.sim.served_models:
        return None
    return 400, error_body(f"Invalid model: {req.body.get('model')}", "invalid_model", "1500", status=400)


def message_structure(req: Req) -> Refusal | None:
    """COMMON _validate_message_list_structure (serving mode), the API's 400s (texts observed, above):
    at least one message; a single message is user or system; the last is user or tool (or an
    assistant with prefix); role order (system -> user|assistant|system, user -> assistant|system|user,
    assistant -> assistant|user|tool, tool -> assistant|tool, and user when the sim's user_after_tool);
    as many tool results as the assistant turn before them made calls."""
    messages = req.messages
    if not messages:
        return order_error("Conversation must have at least one message")  # COMMON text; hosted answer not observed
    roles = [m.get("role") for m in messages]
    if len(roles) == 1 and roles[0] not in ("user", "system"):
        return order_error("Conversation must start with a user message or system message")  # COMMON text
    if len(roles) > 1:
        last = messages[-1]
        if roles[-1] not in ("user", "tool") and not (roles[-1] == "assistant" and last.get("prefix")):
            return order_error("Expected last role User or Tool (or Assistant with prefix True) for serving but got "
                               f"{roles[-1]}")
    allowed = {"system": {"user", "assistant", "system"}, "user": {"assistant", "system", "user"},
               "assistant": {"assistant", "user", "tool"},
               "tool": {"assistant", "tool", "user"} if req.sim.user_after_tool else {"assistant", "tool"}}
    for previous, current in zip(roles, roles[1:], strict=False):
        if current not in allowed[previous]:
            return order_error(f"Unexpected role '{current}' after role '{previous}'")
    expected = 0
    for m in messages[1:]:  # COMMON _validate_tool_calls_followed_by_tool_messages skips the first
        if m.get("role") == "tool":
            expected -= 1
        elif m.get("role") == "assistant":
            if expected != 0:
                return 400, error_body("Not the same number of function calls and responses")
            expected = len(m.get("tool_calls") or [])
    if expected != 0:
        return 400, error_body("Not the same number of function calls and responses")
    return None


def message_content(req: Req) -> Refusal | None:
    """COMMON _validate_message_list_content, as answered (observed texts above): an assistant message
    has content or tool_calls ("..., but not none."; both are allowed from the v7 tokenizer on, which
    pixtral-large and every current model use: COMMON MistralRequestValidatorV5); tool call ids and
    tool results' tool_call_id are 9 characters a-z, A-Z, 0-9 (V3+, "invalid_function_call", 3280);
    function names match ^[a-zA-Z0-9_-]{1,64}$ (COMMON text; the hosted type and code were not observed)."""
    for m in req.messages:
        role = m.get("role")
        if role == "assistant":
            if not m.get("content") and not m.get("tool_calls"):
                return 400, error_body("Assistant message must have either content or tool_calls, but not none.")
            for call in m.get("tool_calls") or []:
                call_id = str(call.get("id", "null"))
                if not TOOL_ID.match(call_id):
                    return 400, error_body(f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
                                           "invalid_function_call", "3280", status=400)
                name = str(call.get("function", {}).get("name"))
                if not NAME.match(name):
                    return 400, error_body(f"Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores "
                                           "and dashes, with a maximum length of 64.", "invalid_function_call", "3280",
                                           status=400)
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id is None:
                return 400, error_body("Tool call id has to be defined.")  # COMMON V3 text
            if not TOOL_ID.match(str(call_id)):
                return 400, error_body(f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
                                       "invalid_function_call", "3280", status=400)
    for tool in req.body.get("tools") or []:
        name = str(tool["function"]["name"])
        if not NAME.match(name):
            return 400, error_body(f"Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores and "
                                   "dashes, with a maximum length of 64.")
    return None


def named_tool_choice(req: Req) -> Refusal | None:
    """A named tool_choice must name one of the tools. Text not found; written in the API's shape."""
    choice = req.body.get("tool_choice")
    if not isinstance(choice, dict):
        return None
    name = choice["function"]["name"]
    if name not in [t["function"]["name"] for t in req.body.get("tools") or []]:
        return 400, error_body(f"Tool choice function '{name}' is not in tools.")
    return None


_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]*);base64,(?P<data>.*)$", re.DOTALL)
_MAGIC = {"png": (b"\x89PNG\r\n\x1a\n",), "jpeg": (b"\xff\xd8\xff",), "gif": (b"GIF87a", b"GIF89a"), "webp": (b"RIFF",)}


def images(req: Req) -> Refusal | None:
    """VISION limits: at most MAX_IMAGES images a request, each at most 10 MB, 10000x10000 px, PNG / JPEG /
    WEBP / single-frame GIF, and only to a vision model. The refusal texts were not found in the docs or
    in public reports; these are written in the API's shape (400, invalid_request_error)."""
    found = list(req.images())
    if found and req.body.get("model") in req.sim.text_only:
        return 400, error_body(f"Model {req.body.get('model')} does not support image input.")
    if len(found) > req.sim.max_images:
        return 400, error_body(f"Too many images in request: {len(found)} provided, the maximum is {req.sim.max_images}.")
    for i, j, url in found:
        if url.startswith(("http://", "https://")):
            continue
        match = _DATA_URL.match(url)
        data = b64decode_strict(match["data"]) if match else None
        if data is None:
            return 400, error_body(f"Invalid image URL or base64 data in messages[{i}].content[{j}].")
        if len(data) > MAX_IMAGE_BYTES:
            return 400, error_body(f"Image in messages[{i}].content[{j}] is larger than 10MB.")
        kind = next((k for k, magics in _MAGIC.items() if any(data.startswith(x) for x in magics)), None)
        if kind is None or (kind == "webp" and data[8:12] != b"WEBP"):
            return 400, error_body(f"Unsupported image format in messages[{i}].content[{j}]: use PNG, JPEG, WEBP or GIF.")
        from PIL import Image

        width, height = Image.open(io.BytesIO(data)).size
        if max(width, height) > MAX_RESOLUTION:
            return 400, error_body(f"Image resolution {width}x{height} in messages[{i}].content[{j}] is higher than "
                                   "10000x10000.")
    return None


RULES: list[Rule] = [message_structure, message_content, named_tool_choice, images]
"""Checked in this order after the key, the 422 schema and the model."""


def _call_id(n: int, k: int) -> str:
    """A tool call id as Mistral makes them (9 characters a-z, A-Z, 0-9, e.g. "D681PevKs"), the same
    for the same (request number, call index)."""
    rng = random.Random(n * 1000 + k)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(9))


@dataclass
class SimMistral(ServedDouble):
    """The simulator: `with SimMistral(script=...) as sim:`; base_url is what MISTRAL_BASE_URL takes.

    requests holds every body received; refused one {"status", "body", "request", "rule"} per refusal;
    accepted the bodies answered by the script (n counts them from 1)."""

    script: Callable[[dict[str, Any], int], Behaviour] = lambda body, n: {"kind": "text", "text": "ok"}
    api_key: str = "mistral-test-key"
    models: set[str] | None = None
    text_only: set[str] = field(default_factory=lambda: set(TEXT_ONLY))
    user_after_tool: bool = False
    max_images: int = MAX_IMAGES
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: LocalJsonServer | None = None
    _accepted_n: int = 0

    @property
    def served_models(self) -> set[str]:
        return DEFAULT_MODELS if self.models is None else self.models

    @property
    def base_url(self) -> str:
        return f"{self._url}/v1"

    def _http_server(self) -> LocalJsonServer:
        return LocalJsonServer(self._handle, poll_interval=0.02)

    def check(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, Refusal] | None:
        """The first rule the request breaks, with its answer; None when it passes them all."""
        req = Req(self, body, headers)
        if (refusal := bearer_key(req)) is not None:
            return "bearer_key", refusal
        errors = _schema_errors(body)
        if errors:  # the observed 422 shape: pydantic's list under message.detail
            return "schema", (422, error_body({"detail": errors}))
        if (refusal := model_served(req)) is not None:
            return "model_served", refusal
        for rule in RULES:
            if (refusal := rule(req)) is not None:
                return rule.__name__, refusal
        return None

    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        if path.rstrip("/") != "/v1/chat/completions":
            # FastAPI's 404 for an unknown route (text not observed for this API)
            return self._send(404, {"detail": "Not Found"})
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(body if isinstance(body, dict) else {"_raw": raw.decode("utf-8", "replace")})
            self.headers.append(headers)
        if not isinstance(body, dict):
            # FastAPI's json_invalid (pydantic wording, not captured from the API), in the observed 422 shape
            refusal = (422, error_body({"detail": [_loc_error("json_invalid", ["body", 0], "JSON decode error", {})]}))
            return self._refuse("json_body", refusal, self.requests[-1])
        found = self.check(body, headers)
        if found is not None:
            return self._refuse(found[0], found[1], body)
        with self._lock:
            self.accepted.append(body)
            self._accepted_n += 1
            n = self._accepted_n
        return self._answer(body, n)

    def _refuse(self, rule: str, refusal: Refusal, body: dict[str, Any]) -> Response:
        status, payload = refusal
        with self._lock:
            self.refused.append({"status": status, "body": payload, "request": body, "rule": rule})
        return self._send(status, payload)

    def _answer(self, body: dict[str, Any], n: int) -> Response:
        behaviour = self.script(body, n)
        if behaviour["kind"] == "slow":
            time.sleep(behaviour["seconds"])
            behaviour = behaviour.get("then", {"kind": "text", "text": "late"})
        if behaviour["kind"] == "raw":
            return self._send(behaviour.get("status", 200), behaviour["body"],
                              content_type=behaviour.get("content_type", "application/json"))
        if behaviour["kind"] == "status":
            status = behaviour["status"]
            extra = {"Retry-After": str(behaviour["retry_after"])} if "retry_after" in behaviour else {}
            return self._send(status, status_body(status, behaviour.get("message")), extra_headers=extra)
        return self._send(200, completion(behaviour, n, str(body.get("model", ""))))

    @staticmethod
    def _send(status: int, payload: Any, *, content_type: str = "application/json",
              extra_headers: dict[str, str] | None = None) -> Response:
        raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        return status, [("Content-Type", content_type), *(extra_headers or {}).items()], raw


def status_body(status: int, message: str | None) -> dict[str, Any]:
    """An injected failure. 429: observed (raycast#31107); 500/503: text not found (ERRORS lists the
    statuses only), written in the API's shape."""
    if status == 429:
        return error_body(message or "Rate limit exceeded", "rate_limited", "1300", status=429)
    default = {500: "Internal server error", 503: "Service unavailable"}.get(status, "injected failure")
    return error_body(message or default, "internal_server_error" if status == 500 else "service_unavailable",
                      status=status)


def completion(behaviour: Behaviour, n: int, model: str) -> dict[str, Any]:
    """A chat.completion as Mistral answers it (OAS ChatCompletionResponse; the SDK's ToolCall): tool calls
    carry a 9-character id, the function and an index; content is "" beside tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": None}
    if behaviour["kind"] in ("tool", "tools"):
        calls = behaviour["calls"] if behaviour["kind"] == "tools" else [behaviour]
        message["tool_calls"] = [{"id": _call_id(n, k), "function": {"name": c["name"], "arguments": c["arguments"]},
                                  "index": k} for k, c in enumerate(calls)]
        message["content"] = behaviour.get("text", "")
        finish = "tool_calls"
    else:
        message["content"] = behaviour["text"]
        finish = "stop"
    prompt, completion_tokens = behaviour.get("prompt_tokens", 100), behaviour.get("completion_tokens", 20)
    return {"id": f"{n:032x}", "object": "chat.completion", "created": 1_750_000_000 + n, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                      "total_tokens": prompt + completion_tokens}}
