"""A strict local simulator of the OpenAI Chat Completions API and of the OpenAI-compatible
endpoints of Gemini, vLLM, Ollama and llama.cpp, for the project's tests.

A fake server that accepts what the real provider refuses proves nothing. So this one checks each
request against rules the real service documents (or is observed to answer with), refuses a
request that breaks one with that service's own status, body shape and message, and only then
asks the test's script what to answer. Every rule below carries, next to it, the page it comes
from and the exact text of the error; where the exact text could not be found, the comment says
so. Only the script's answer is made up.

Profiles: "openai", "gemini", "vllm", "ollama", "llamacpp". The script convention is FakeOpenAI's
(`Behaviour` dicts, see tests/fake_openai.py), so a script written for FakeOpenAI works unchanged.

    with SimOpenAI(profile="openai") as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)
        ...
        assert sim.refused == []

Sources used throughout (cited by short name in the rules):
  OPENAI-REF    https://platform.openai.com/docs/api-reference/chat/create
  OPENAI-ERR    https://platform.openai.com/docs/guides/error-codes
  OPENAI-REAS   https://platform.openai.com/docs/guides/reasoning
  OPENAI-VIS    https://platform.openai.com/docs/guides/images-vision
  OPENAI-SO     https://platform.openai.com/docs/guides/structured-outputs
  GEMINI-COMPAT https://ai.google.dev/gemini-api/docs/openai
  GEMINI-TS     https://ai.google.dev/gemini-api/docs/troubleshooting
  VLLM-SERVER   https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html
  VLLM-TOOLS    https://docs.vllm.ai/en/latest/features/tool_calling.html
  OLLAMA-OAI    https://github.com/ollama/ollama/blob/main/docs/openai.md (now docs/api/openai-compatibility.mdx)
  LLAMA-SERVER  https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md
                and tools/server/server-common.cpp (oaicompat_chat_params_parse)
  LCPP-PY       https://github.com/abetlen/llama-cpp-python/blob/main/llama_cpp/server/errors.py
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fake_openai import Behaviour, completion_payload
from http_double import LocalJsonServer, Response, ServedDouble, b64decode_strict

Refusal = tuple[int, Any]
"""(HTTP status, JSON body) of a refused request."""

PROFILES = ("openai", "gemini", "vllm", "ollama", "llamacpp")

DEFAULT_MODELS: dict[str, set[str]] = {
    "openai": {"gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini",
               "o3", "o4-mini", "o1", "gpt-3.5-turbo"},
    "gemini": {"gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.0-flash"},
    "vllm": {"Qwen/Qwen2.5-7B-Instruct"},
    "ollama": {"llama3.2", "qwen2.5vl"},
    "llamacpp": set(),  # llama-server answers with whatever model it loaded, whatever the name
}

_PROFILE_DEFAULT = "\x00profile-default"
"""api_key's default: "sk-test" for the hosted services (openai, gemini), no auth for the local
servers (vllm, ollama, llamacpp), which run without --api-key unless told otherwise."""

# The request parameters of OpenAI's Chat Completions API (OPENAI-REF). Anything else is refused
# by OpenAI with "Unrecognized request argument supplied: X".
OPENAI_PARAMS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
    "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
    "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "reasoning_effort",
    "response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
    "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
    "verbosity", "web_search_options",
})


# --- the answer shapes, one per service --------------------------------------------------------------

# google.rpc.Code names for the HTTP statuses Gemini answers with (GEMINI-TS: "400 INVALID_ARGUMENT",
# "403 PERMISSION_DENIED", "404 NOT_FOUND", "429 RESOURCE_EXHAUSTED", "500 INTERNAL", "503 UNAVAILABLE").
_GRPC_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
# vLLM's ErrorInfo.type is the exception class name (create_error_response's err_type), as in
# {"object":"error","message":"The model `X` does not exist.","type":"NotFoundError","param":null,"code":404}
# (https://github.com/vllm-project/vllm/issues/3485). The 429/500/503 names are the same pattern, not observed.
_VLLM_TYPE = {400: "BadRequestError", 401: "Unauthorized", 404: "NotFoundError", 429: "TooManyRequestsError",
              500: "InternalServerError", 503: "ServiceUnavailableError"}
# llama-server's error types (server-common.cpp format_error_response): invalid_request_error (400),
# authentication_error (401), not_found_error (404), server_error (500), unavailable_error (503).
_LLAMA_TYPE = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               429: "server_error", 500: "server_error", 503: "unavailable_error"}


def openai_body(message: str, *, type: str = "invalid_request_error", param: str | None = None,
                code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body (OPENAI-ERR): {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def gemini_body(status: int, message: str, details: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Gemini's OpenAI-compatible endpoint answers a JSON *list* of one google.rpc error, e.g.
    [{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name \\"google\\": Cannot
    find field.", "status": "INVALID_ARGUMENT", "details": [...]}}]
    (observed at POST /v1beta/openai/chat/completions: https://github.com/Alishahryar1/free-claude-code/issues/542,
    https://github.com/leookun/cursor-byok/issues/112)."""
    error: dict[str, Any] = {"code": status, "message": message, "status": _GRPC_STATUS.get(status, "UNKNOWN")}
    if details:
        error["details"] = details
    return [{"error": error}]


def vllm_body(status: int, message: str, *, type: str | None = None, param: str | None = None) -> dict[str, Any]:
    """vLLM's ErrorResponse: {"error": {"message", "type", "param", "code": <int status>}}
    (vllm/entrypoints/openai/engine/protocol.py: class ErrorInfo(message, type, param, code: int);
    before 2025 the same fields sat at top level with "object": "error")."""
    return {"error": {"message": message, "type": type or _VLLM_TYPE.get(status, "BadRequestError"),
                      "param": param, "code": status}}


def ollama_body(status: int, message: str) -> dict[str, Any]:
    """Ollama's openai.NewError (openai/openai.go): type invalid_request_error for 400,
    not_found_error for 404, api_error otherwise; param and code null."""
    etype = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
    return {"error": {"message": message, "type": etype, "param": None, "code": None}}


def llamacpp_body(status: int, message: str, *, type: str | None = None) -> dict[str, Any]:
    """llama-server's error body (server-common.cpp format_error_response), e.g. {"error":{"code":500,
    "message":"tools param requires --jinja flag","type":"server_error"}}, as reported from live servers."""
    return {"error": {"code": status, "message": message, "type": type or _LLAMA_TYPE.get(status, "server_error")}}


# --- the request as the rules see it -----------------------------------------------------------------


@dataclass
class Req:
    sim: SimOpenAI
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def profile(self) -> str:
        return self.sim.profile

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    def refuse(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
               type: str | None = None) -> Refusal:
        """A refusal with an OpenAI-schema message, in the answering service's own body shape."""
        profile = self.profile
        if profile == "openai":
            return status, openai_body(message, type=type or "invalid_request_error", param=param, code=code)
        if profile == "gemini":
            return status, gemini_body(status, message)
        if profile == "vllm":
            return status, vllm_body(status, message, param=param)
        if profile == "ollama":
            return status, ollama_body(status, message)
        if self.sim.server == "llama-cpp-python":
            return status, {"error": {"message": message, "type": type or "invalid_request_error",
                                      "param": param, "code": code}}
        return status, llamacpp_body(status, message, type=type)

    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages")
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []

    def parts(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(message index, part index, part) of every content part given as a list."""
        msgs = self.body.get("messages")
        if not isinstance(msgs, list):
            return
        for i, m in enumerate(msgs):
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                for j, p in enumerate(m["content"]):
                    if isinstance(p, dict):
                        yield i, j, p

    def images(self) -> Iterator[tuple[int, int, str]]:
        for i, j, p in self.parts():
            if p.get("type") == "image_url":
                yield i, j, _image_url(p)

    def tool_names(self) -> list[str]:
        tools = self.body.get("tools")
        if not isinstance(tools, list):
            return []
        return [str(t.get("function", {}).get("name")) for t in tools
                if isinstance(t, dict) and isinstance(t.get("function"), dict)]


Rule = Callable[[Req], Refusal | None]


def _image_url(part: dict[str, Any]) -> str:
    value = part.get("image_url")
    if isinstance(value, dict):
        return str(value.get("url", ""))
    return str(value or "")  # Ollama also takes a bare string here


def _oxford(values: list[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}" if len(quoted) > 2 else " and ".join(quoted)


def _number(value: Any) -> str:
    """A number as OpenAI echoes it back: 0 for 0, 0.2 for 0.2."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value)


_DATA_URL = re.compile(r"^data:(?P<mime>[^;,]*)(?P<b64>;base64)?,(?P<data>.*)$", re.DOTALL)
_IMAGE_MAGIC = {"png": (b"\x89PNG\r\n\x1a\n",), "jpeg": (b"\xff\xd8\xff",), "gif": (b"GIF87a", b"GIF89a"),
                "webp": (b"RIFF",)}


def _sniff(data: bytes) -> str | None:
    for kind, magics in _IMAGE_MAGIC.items():
        if any(data.startswith(m) for m in magics) and (kind != "webp" or data[8:12] == b"WEBP"):
            return kind
    return None


# --- rules every profile enforces: authentication and the served model -------------------------------


def bearer_key(req: Req) -> Refusal | None:
    """The Authorization: Bearer key, when the server has one (hosted services always do; the local
    servers only when started with --api-key). Never echoes the full key back."""
    want = req.sim.api_key
    if want is None or req.profile == "ollama":  # OLLAMA-OAI: no auth; the key is "required but ignored"
        return None
    auth = req.headers.get("authorization", "")
    got = auth[7:] if auth.lower().startswith("bearer ") else ""
    if got == want:
        return None
    if req.profile == "openai":
        # OPENAI-ERR 401 "Invalid Authentication"/"Incorrect API key provided". Observed bodies:
        # {"message": "You didn't provide an API key. You need to provide your API key in an Authorization
        #  header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank
        #  username) if you're accessing the API from your browser and are prompted for a username and
        #  password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
        #  "type": "invalid_request_error", "param": null, "code": null}   (chatboxai/chatbox#98)
        # {"message": "Incorrect API key provided: sk-PMafP***...E873. You can find your API key at
        #  https://platform.openai.com/account/api-keys.", "type": "invalid_request_error", "param": null,
        #  "code": "invalid_api_key"}   (popjane/free_chatgpt_api#3) -- the key is masked.
        if not got:
            return 401, openai_body(
                "You didn't provide an API key. You need to provide your API key in an Authorization header "
                "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank "
                "username) if you're accessing the API from your browser and are prompted for a username and "
                "password. You can obtain an API key from https://platform.openai.com/account/api-keys.")
        return 401, openai_body(
            f"Incorrect API key provided: {mask_key(got)}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.", code="invalid_api_key")
    if req.profile == "gemini":
        # GEMINI-TS 403 PERMISSION_DENIED / 400 INVALID_ARGUMENT. Observed texts (Google APIs):
        # no key: 403 "Method doesn't allow unregistered callers (callers without established identity).
        #   Please use API Key or other form of API consumer identity to call this API." (PERMISSION_DENIED)
        # bad key: 400 "API key not valid. Please pass a valid API key." (INVALID_ARGUMENT, reason
        #   API_KEY_INVALID; continuedev/continue#12828). That the compat endpoint wraps these two in its
        #   list shape is assumed from its other errors, not observed.
        if not got:
            return 403, gemini_body(403, "Method doesn't allow unregistered callers (callers without established "
                                         "identity). Please use API Key or other form of API consumer identity "
                                         "to call this API.")
        return 400, gemini_body(400, "API key not valid. Please pass a valid API key.", [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}])
    if req.profile == "vllm":
        # VLLM-SERVER "--api-key": the AuthenticationMiddleware answers 401 {"error": "Unauthorized"}
        # (recalled from vllm/entrypoints/openai/api_server.py; not re-read for this file).
        return 401, {"error": "Unauthorized"}
    if req.sim.server == "llama-cpp-python":
        # LCPP-PY app.py authenticate(): HTTPException(401, detail="Invalid API key") -> FastAPI's body.
        return 401, {"detail": "Invalid API key"}
    # LLAMA-SERVER "--api-key": 401 {"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}
    return 401, llamacpp_body(401, "Invalid API Key")


def mask_key(key: str) -> str:
    """OpenAI's masking of a wrong key in its 401: the first characters, stars, the last four
    ("sk-PMafP***************************************E873"); short keys keep only a prefix."""
    if len(key) > 12:
        return key[:8] + "*" * (len(key) - 12) + key[-4:]
    return key[:5] + "*" * max(len(key) - 5, 3)


def model_served(req: Req) -> Refusal | None:
    """A model the server does not serve, in that service's "not found" answer."""
    models = req.sim.served_models
    model = req.model
    if req.profile == "llamacpp" or not model or model in models:
        return None
    if req.profile == "openai":
        # OPENAI-ERR 404: {"message": "The model `gtp-4` does not exist or you do not have access to it.",
        #  "type": "invalid_request_error", "param": null, "code": "model_not_found"}
        return 404, openai_body(f"The model `{model}` does not exist or you do not have access to it.",
                                code="model_not_found")
    if req.profile == "gemini":
        # Observed from the compat endpoint: [{"error":{"code":404,"message":"models/no-existe is not found for
        # API version v1main, or is not supported for generateContent.","status":"NOT_FOUND"}}]
        return 404, gemini_body(404, f"models/{model} is not found for API version v1main, or is not supported "
                                     "for generateContent.")
    if req.profile == "vllm":
        # VLLM-SERVER (serving _check_model): "The model `X` does not exist." NotFoundError 404 (vllm#3485)
        return 404, vllm_body(404, f"The model `{model}` does not exist.")
    # Ollama: server/routes.go ChatHandler 404 "model '%s' not found", wrapped by the OpenAI middleware.
    return 404, ollama_body(404, f"model '{model}' not found")


# --- the OpenAI request schema (OPENAI-REF), for every profile ---------------------------------------
# These are OpenAI's rules and texts. With schema_strict (the default) they hold on every profile,
# because every one of these servers is used as "OpenAI-compatible" and the harness must send a valid
# OpenAI request whichever it talks to; the answer still comes in the answering server's body shape.


def model_present(req: Req) -> Refusal | None:
    """OPENAI-REF: model is required. Observed: "you must provide a model parameter"
    (invalid_request_error, param null, code null)."""
    if not req.body.get("model"):
        return req.refuse(400, "you must provide a model parameter")
    return None


def messages_present(req: Req) -> Refusal | None:
    """OPENAI-REF: messages is required, minItems 1. Observed: "Missing required parameter: 'messages'."
    (code missing_required_parameter) and "Invalid 'messages': empty array. Expected an array with
    minimum length 1, but got an empty array instead." (code empty_array, param messages)."""
    msgs = req.body.get("messages")
    if msgs is None:
        return req.refuse(400, "Missing required parameter: 'messages'.", param="messages",
                          code="missing_required_parameter")
    if isinstance(msgs, list) and not msgs:
        return req.refuse(400, "Invalid 'messages': empty array. Expected an array with minimum length 1, but "
                               "got an empty array instead.", param="messages", code="empty_array")
    return None


_ROLES = ["system", "assistant", "user", "function", "tool", "developer"]


def message_roles(req: Req) -> Refusal | None:
    """OPENAI-REF roles. Observed: "Invalid value: 'tooool'. Supported values are: 'system', 'assistant',
    'user', 'function', 'tool', and 'developer'." (param messages[2].role, code invalid_value)."""
    for i, m in enumerate(req.messages()):
        role = m.get("role")
        if role not in _ROLES:
            return req.refuse(400, f"Invalid value: '{role}'. Supported values are: {_oxford(_ROLES)}.",
                              param=f"messages[{i}].role", code="invalid_value")
    return None


def tool_message_answers_call(req: Req) -> Refusal | None:
    """OPENAI-REF: a tool message answers a tool call of the assistant message right before it (tool
    messages may follow each other). Observed 400: "Invalid parameter: messages with role 'tool' must
    be a response to a preceeding message with 'tool_calls'." (param "messages.[4].role", code null;
    the typo is OpenAI's)."""
    pending: set[str] = set()
    for i, m in enumerate(req.messages()):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return req.refuse(400, "Invalid parameter: messages with role 'tool' must be a response to a "
                                       "preceeding message with 'tool_calls'.", param=f"messages.[{i}].role")
            continue
        pending = {str(c.get("id")) for c in m.get("tool_calls") or [] if isinstance(c, dict)} \
            if role == "assistant" else set()
    return None


def tool_calls_answered(req: Req) -> Refusal | None:
    """OPENAI-REF: an assistant message with tool_calls is followed by a tool message for every call.
    Observed 400: "An assistant message with 'tool_calls' must be followed by tool messages responding
    to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_x"
    (param "messages.[3].role" -- the message where the answers stop -- or "messages"; code null)."""
    msgs = req.messages()
    for i, m in enumerate(msgs):
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        ids = [str(c.get("id")) for c in m["tool_calls"] if isinstance(c, dict)]
        j = i + 1
        answered: set[str] = set()
        while j < len(msgs) and msgs[j].get("role") == "tool":
            answered.add(str(msgs[j].get("tool_call_id")))
            j += 1
        missing = [x for x in ids if x not in answered]
        if missing:
            return req.refuse(400, "An assistant message with 'tool_calls' must be followed by tool messages "
                                   "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                                   f"response messages: {', '.join(missing)}",
                              param=f"messages.[{j}].role" if j < len(msgs) else "messages")
    return None


_PART_TYPES = ["text", "image_url", "input_audio", "refusal", "audio", "file"]


def content_parts(req: Req) -> Refusal | None:
    """OPENAI-REF content part types. Observed: "Invalid value: 'image'. Supported values are: 'text',
    'image_url', 'input_audio', 'refusal', 'audio', and 'file'." (param messages[1].content[0].type,
    code invalid_value). Also: a text part carries a string "text"."""
    for i, j, p in req.parts():
        kind = p.get("type")
        if kind not in _PART_TYPES:
            return req.refuse(400, f"Invalid value: '{kind}'. Supported values are: {_oxford(_PART_TYPES)}.",
                              param=f"messages[{i}].content[{j}].type", code="invalid_value")
        if kind == "text" and not isinstance(p.get("text"), str):
            # OPENAI-REF text part: "text" (string, required). Text of the error not found; this is
            # OpenAI's missing-parameter form ("Missing required parameter: 'messages'.").
            return req.refuse(400, f"Missing required parameter: 'messages[{i}].content[{j}].text'.",
                              param=f"messages[{i}].content[{j}].text", code="missing_required_parameter")
    return None


_DATA_URL_EXAMPLE = "(e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU=')"


def image_urls(req: Req) -> Refusal | None:
    """OPENAI-VIS: image_url.url is an http(s) URL or a base64 data URL of a PNG, JPEG, WEBP or
    non-animated GIF. Observed texts:
    - "Invalid image URL: 'messages[1].content[0].image_url.url'. Expected a base64-encoded data URL with
      an image MIME type (e.g. 'data:image/png;base64,...'), but got unsupported MIME type
      'application/pdf'." (and "... but got an invalid base64-encoded value." / "... but got empty
      base64-encoded bytes." / "... a value without the ';base64' separator."; code invalid_value)
    - bytes that are no such image: "You uploaded an unsupported image. Please make sure your image has
      of one the following formats: ['png', 'jpeg', 'gif', 'webp']." (param null, code invalid_image_format)
    """
    for i, j, url in req.images():
        if url.startswith(("http://", "https://")):
            continue
        path = f"messages[{i}].content[{j}].image_url.url"
        head = f"Invalid image URL: '{path}'. Expected a base64-encoded data URL with an image MIME type {_DATA_URL_EXAMPLE}, but got "
        match = _DATA_URL.match(url)
        if match is None:
            return req.refuse(400, head + "a value with an invalid format.", param=path, code="invalid_value")
        mime = match["mime"]
        if mime not in ("image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp"):
            return req.refuse(400, head + f"unsupported MIME type '{mime}'.", param=path, code="invalid_value")
        if not match["b64"]:
            return req.refuse(400, head + "a value without the ';base64' separator.", param=path,
                              code="invalid_value")
        data = b64decode_strict(match["data"])
        if data is None:
            return req.refuse(400, head + "an invalid base64-encoded value.", param=path, code="invalid_value")
        if not data:
            return req.refuse(400, head + "empty base64-encoded bytes.", param=path, code="invalid_value")
        if _sniff(data) is None:
            return req.refuse(400, "You uploaded an unsupported image. Please make sure your image has of one the "
                                   "following formats: ['png', 'jpeg', 'gif', 'webp'].", code="invalid_image_format")
    return None


_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


def tool_definitions(req: Req) -> Refusal | None:
    """OPENAI-REF tools: {"type": "function", "function": {"name", "description"?, "parameters"?,
    "strict"?}}; the name matches ^[a-zA-Z0-9_-]{1,64}$ and parameters is an object schema. Observed:
    - "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the
      pattern '^[a-zA-Z0-9_-]+$'." (param tools[0].function.name, code invalid_value)
    - "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got
      a string with length 71 instead." (code string_above_max_length)
    - "Invalid schema for function 'X': schema must be a JSON Schema of 'type: \\"object\\"', got 'type: null'."
      (code invalid_function_parameters)
    - "Missing required parameter: 'tools[0].function'." (code missing_required_parameter)"""
    tools = req.body.get("tools")
    if not isinstance(tools, list):
        return None
    for k, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict):
            return req.refuse(400, f"Missing required parameter: 'tools[{k}].function'.",
                              param=f"tools[{k}].function", code="missing_required_parameter")
        if tool.get("type") != "function":
            # Text of this one not found; OpenAI's invalid_value form, as for roles.
            return req.refuse(400, f"Invalid value: '{tool.get('type')}'. Supported values are: 'function'.",
                              param=f"tools[{k}].type", code="invalid_value")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            return req.refuse(400, f"Missing required parameter: 'tools[{k}].function.name'.",
                              param=f"tools[{k}].function.name", code="missing_required_parameter")
        if len(name) > 64:
            return req.refuse(400, f"Invalid 'tools[{k}].function.name': string too long. Expected a string with "
                                   f"maximum length 64, but got a string with length {len(name)} instead.",
                              param=f"tools[{k}].function.name", code="string_above_max_length")
        if not _NAME.match(name):
            return req.refuse(400, f"Invalid 'tools[{k}].function.name': string does not match pattern. Expected a "
                                   "string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                              param=f"tools[{k}].function.name", code="invalid_value")
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            got = params.get("type") if isinstance(params, dict) else None
            shown = "null" if got is None else json.dumps(got)
            return req.refuse(400, f"Invalid schema for function '{name}': schema must be a JSON Schema of "
                                   f"'type: \"object\"', got 'type: {shown}'.",
                              param=f"tools[{k}].function.parameters", code="invalid_function_parameters")
    return None


def tool_choice_valid(req: Req) -> Refusal | None:
    """OPENAI-REF tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}},
    only with tools. Observed: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when
    'tools' are specified." (writer/writer-framework#1013, relaying OpenAI; param tool_choice). The texts
    for an unknown string and for a name not in tools were not found: the first uses OpenAI's
    invalid_value form, the second is written here."""
    choice = req.body.get("tool_choice")
    if choice is None:
        return None
    if not req.body.get("tools"):
        return req.refuse(400, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                               "specified.", param="tool_choice")
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            return req.refuse(400, f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and "
                                   "'required'.", param="tool_choice", code="invalid_value")
        return None
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not name:
        return req.refuse(400, "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or "
                               "{\"type\": \"function\", \"function\": {\"name\": ...}}.", param="tool_choice",
                          code="invalid_value")
    if name not in req.tool_names():
        return req.refuse(400, f"Invalid value for 'tool_choice': function '{name}' is not one of 'tools'.",
                          param="tool_choice.function.name", code="invalid_value")
    return None


_FORMATS = ["json_object", "json_schema", "text"]


def response_format_valid(req: Req) -> Refusal | None:
    """OPENAI-REF response_format: {"type": "text"} | {"type": "json_object"} | {"type": "json_schema",
    "json_schema": {"name": ^[a-zA-Z0-9_-]{1,64}$, "schema", "strict"?}}. Observed: "Invalid
    'response_format.json_schema.name': string does not match pattern. Expected a string that matches
    the pattern '^[a-zA-Z0-9_-]+$'."; the type error follows OpenAI's invalid_value form ("Invalid value:
    'bogus'. Supported values are: 'json_object', 'json_schema', and 'text'.", as a third-party replica
    of the API records it); the missing-name text is OpenAI's missing-parameter form."""
    rf = req.body.get("response_format")
    if rf is None:
        return None
    kind = rf.get("type") if isinstance(rf, dict) else None
    if kind not in _FORMATS:
        return req.refuse(400, f"Invalid value: '{kind}'. Supported values are: {_oxford(_FORMATS)}.",
                          param="response_format.type", code="invalid_value")
    if kind != "json_schema":
        return None
    js = rf.get("json_schema")
    name = js.get("name") if isinstance(js, dict) else None
    if not isinstance(name, str):
        return req.refuse(400, "Missing required parameter: 'response_format.json_schema.name'.",
                          param="response_format.json_schema.name", code="missing_required_parameter")
    if len(name) > 64 or not _NAME.match(name):
        return req.refuse(400, "Invalid 'response_format.json_schema.name': string does not match pattern. "
                               "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                          param="response_format.json_schema.name", code="invalid_value")
    return None


SCHEMA_RULES: list[Rule] = [model_present, messages_present, message_roles, tool_message_answers_call,
                            tool_calls_answered, content_parts, image_urls, tool_definitions, tool_choice_valid,
                            response_format_valid]


# --- OpenAI ------------------------------------------------------------------------------------------


def _is_reasoning(model: str) -> bool:
    """OPENAI-REAS: o1, o3, o4-mini and the gpt-5 family are reasoning models; gpt-5-chat-latest is not."""
    return model.startswith(("o1", "o3", "o4", "gpt-5")) and not model.startswith("gpt-5-chat")


def _effort_values(model: str) -> list[str]:
    """OPENAI-REF reasoning_effort: o-series low/medium/high; gpt-5 adds "minimal" (no "none": observed
    "Unsupported value: 'reasoning_effort' does not support 'none' with this model. Supported values are:
    'minimal', 'low', 'medium', and 'high'."); gpt-5.1 and later take none/low/medium/high (observed
    "Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. Supported values are:
    'none', 'low', 'medium', and 'high'.", openai/openai-agents-python#2089)."""
    if model.startswith("gpt-5."):
        return ["none", "low", "medium", "high"]
    if model.startswith("gpt-5"):
        return ["minimal", "low", "medium", "high"]
    return ["low", "medium", "high"]


def unknown_parameters(req: Req) -> Refusal | None:
    """OPENAI-REF lists the parameters; anything else: "Unrecognized request argument supplied: X"
    (invalid_request_error, param null, code null; observed e.g. langchain_dart#712)."""
    for key in req.body:
        if key not in OPENAI_PARAMS:
            return req.refuse(400, f"Unrecognized request argument supplied: {key}")
    return None


def reasoning_max_tokens(req: Req) -> Refusal | None:
    """OPENAI-REAS: reasoning models take max_completion_tokens, not max_tokens. Observed verbatim:
    {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use
    'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens",
    "code": "unsupported_parameter"}."""
    if _is_reasoning(req.model) and req.body.get("max_tokens") is not None:
        return req.refuse(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                               "'max_completion_tokens' instead.", param="max_tokens", code="unsupported_parameter")
    return None


def reasoning_sampling(req: Req) -> Refusal | None:
    """OPENAI-REAS: reasoning models take only the default sampling. Observed verbatim:
    "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is
    supported." (param temperature, code unsupported_value; the number is the value sent, "0.2", "0.0"...).
    top_p, presence_penalty, frequency_penalty, logprobs, top_logprobs and logit_bias: "Unsupported
    parameter: 'top_p' is not supported with this model." (param top_p, code unsupported_parameter;
    observed for o1 and gpt-5; defaults 1 / 0 are accepted, as the developer forum reports)."""
    if not _is_reasoning(req.model):
        return None
    temperature = req.body.get("temperature")
    if temperature is not None and temperature != 1:
        return req.refuse(400, f"Unsupported value: 'temperature' does not support {_number(temperature)} with this "
                               "model. Only the default (1) value is supported.", param="temperature",
                          code="unsupported_value")
    defaults: dict[str, Any] = {"top_p": 1, "presence_penalty": 0, "frequency_penalty": 0, "logprobs": False}
    for name in ("top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias"):
        value = req.body.get(name)
        if value is not None and (name not in defaults or value != defaults[name]):
            return req.refuse(400, f"Unsupported parameter: '{name}' is not supported with this model.",
                              param=name, code="unsupported_parameter")
    return None


def reasoning_effort_values(req: Req) -> Refusal | None:
    """reasoning_effort: refused by non-reasoning models ("Unrecognized request argument supplied:
    reasoning_effort", observed for gpt-4o-mini: langchain_dart#712, umputun/tg-spam#304), and limited
    per reasoning family (see _effort_values): "Unsupported value: 'reasoning_effort' does not support
    'xhigh' with this model. Supported values are: 'low', 'medium', and 'high'." (param reasoning_effort,
    code unsupported_value; livekit/agents#3966)."""
    effort = req.body.get("reasoning_effort")
    if effort is None:
        return None
    if not _is_reasoning(req.model):
        return req.refuse(400, "Unrecognized request argument supplied: reasoning_effort")
    allowed = _effort_values(req.model)
    if effort not in allowed:
        return req.refuse(400, f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this model. "
                               f"Supported values are: {_oxford(allowed)}.", param="reasoning_effort",
                          code="unsupported_value")
    return None


_NO_VISION = ("gpt-3.5-turbo", "o1-mini", "o3-mini")


def vision_support(req: Req) -> Refusal | None:
    """OPENAI-VIS: images only for vision models (not gpt-3.5-turbo, o1-mini, o3-mini). Observed verbatim:
    {"message": "Invalid content type. image_url is only supported by certain models.", "type":
    "invalid_request_error", "param": "messages.[1].content.[0].type", "code": null} (vllm#11629,
    zou-group/textgrad#210)."""
    if not req.model.startswith(_NO_VISION):
        return None
    for i, j, _ in req.images():
        return req.refuse(400, "Invalid content type. image_url is only supported by certain models.",
                          param=f"messages.[{i}].content.[{j}].type")
    return None


def image_limits(req: Req) -> Refusal | None:
    """OPENAI-VIS "Image input requirements": "Up to 512 MB total payload size per request - Up to 1500
    individual image inputs per request" (earlier: 50 MB / 500 images); the simulator's
    max_images_per_request / max_image_payload_bytes. The refusal texts were not found in OpenAI's
    docs; the count one is the text an OpenAI-backed app reported ("Too many images in request. Max is
    10.", the-open-agent/openagent#874), the size one is written here."""
    images = list(req.images())
    if len(images) > req.sim.max_images_per_request:
        return req.refuse(400, f"Too many images in request. Max is {req.sim.max_images_per_request}.",
                          param="messages")
    total = sum(len(url) for _, _, url in images if url.startswith("data:"))
    if total > req.sim.max_image_payload_bytes:
        return req.refuse(400, f"Total image payload too large: {total} bytes. Max is "
                               f"{req.sim.max_image_payload_bytes} bytes.", param="messages")
    return None


def _message_texts(req: Req) -> Iterator[str]:
    for m in req.messages():
        content = m.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            yield from (p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def json_object_needs_json_word(req: Req) -> Refusal | None:
    """OPENAI-SO (JSON mode): the messages must ask for JSON. Observed verbatim: {"message": "'messages'
    must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
    "type": "invalid_request_error", "param": "messages", "code": null}."""
    rf = req.body.get("response_format")
    wants_json = isinstance(rf, dict) and rf.get("type") == "json_object"
    if wants_json and not any("json" in t.lower() for t in _message_texts(req)):
        return req.refuse(400, "'messages' must contain the word 'json' in some form, to use 'response_format' "
                               "of type 'json_object'.", param="messages")
    return None


def _strict_violation(schema: Any, path: tuple[Any, ...]) -> str | None:
    """OPENAI-SO "Supported schemas": with strict, every object has additionalProperties: false and lists
    every property in required. The first violation, in OpenAI's words and context notation."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            if schema.get("additionalProperties") is not False:
                return f"In context={path!r}, 'additionalProperties' is required to be supplied and to be false."
            props = schema.get("properties") or {}
            required = schema.get("required") or []
            missing = [k for k in props if k not in required]
            if missing:
                return (f"In context={path!r}, 'required' is required to be supplied and to be an array including "
                        f"every key in properties. Missing '{missing[0]}'.")
        for key in ("properties", "$defs", "definitions"):
            for name, sub in (schema.get(key) or {}).items():
                if (found := _strict_violation(sub, (*path, key, name))) is not None:
                    return found
        if (found := _strict_violation(schema.get("items"), (*path, "items"))) is not None:
            return found
        for key in ("anyOf", "allOf"):
            for n, sub in enumerate(schema.get(key) or []):
                if (found := _strict_violation(sub, (*path, key, n))) is not None:
                    return found
    return None


def strict_json_schema(req: Req) -> Refusal | None:
    """OPENAI-SO: strict schemas (response_format json_schema and function tools with strict: true)
    need additionalProperties false and all properties required. Observed verbatim:
    "Invalid schema for response_format 'default': In context=(), 'additionalProperties' is required to be
    supplied and to be false." (param response_format, code null); "... In context=('properties',
    'organizations', 'items'), 'required' is required to be supplied and to be an array including every
    key in properties. Missing 'roles'."; for tools "Invalid schema for function 'glob': In context=(),
    'additionalProperties' is required to be supplied and to be false" (code invalid_function_parameters)."""
    rf = req.body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema") or {}
        if js.get("strict") is True and (found := _strict_violation(js.get("schema"), ())) is not None:
            return req.refuse(400, f"Invalid schema for response_format '{js.get('name')}': {found}",
                              param="response_format")
    for k, tool in enumerate(req.body.get("tools") or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or fn.get("strict") is not True:
            continue
        if (found := _strict_violation(fn.get("parameters"), ())) is not None:
            return req.refuse(400, f"Invalid schema for function '{fn.get('name')}': {found}",
                              param=f"tools[{k}].function.parameters", code="invalid_function_parameters")
    return None


# --- Gemini (GEMINI-COMPAT) --------------------------------------------------------------------------

# OpenAI parameters the compat endpoint was observed to refuse with "Unknown name": frequency_penalty
# (versun/RSSBox#132, 2025-09; MinLL/SkyrimNet-GamePlugin#77), prompt_cache_key (leookun/cursor-byok#112,
# 2026-06). Anything outside OpenAI's parameters (and extra_body) is unknown to it as well ("reasoning",
# "top_k", "google" observed).
_GEMINI_REFUSED = frozenset({"frequency_penalty", "prompt_cache_key"})


def gemini_unknown_fields(req: Req) -> Refusal | None:
    """Observed verbatim from /v1beta/openai/chat/completions: [{"error": {"code": 400, "message":
    "Invalid JSON payload received. Unknown name \\"reasoning\\": Cannot find field.", "status":
    "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
    "fieldViolations": [{"description": "..."}]}]}}]; several unknown names are joined by newlines, and
    an unknown key inside extra_body reads 'Unknown name "x" at \\'extra_body\\': Cannot find field.'"""
    unknown = [f'Invalid JSON payload received. Unknown name "{k}": Cannot find field.'
               for k in req.body if k != "extra_body" and (k not in OPENAI_PARAMS or k in _GEMINI_REFUSED)]
    extra = req.body.get("extra_body")
    if isinstance(extra, dict):
        unknown += [f"Invalid JSON payload received. Unknown name \"{k}\" at 'extra_body': Cannot find field."
                    for k in extra if k != "google"]
    if not unknown:
        return None
    details = [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"description": d} for d in unknown]}]
    return 400, gemini_body(400, "\n".join(unknown), details)


def _thinking_config(req: Req) -> dict[str, Any]:
    extra = req.body.get("extra_body")
    google = extra.get("google") if isinstance(extra, dict) else None
    config = google.get("thinking_config") if isinstance(google, dict) else None
    return config if isinstance(config, dict) else {}


def gemini_effort_or_thinking_config(req: Req) -> Refusal | None:
    """GEMINI-COMPAT: "Note that reasoning_effort and thinking_level/thinking_budget overlap functionality,
    so they can't be used at the same time." Observed verbatim: [{"error":{"code":400,"message":"Expected
    one of either `reasoning_effort` or custom `thinking_config`; found both.","status":"INVALID_ARGUMENT"}}]
    (Alishahryar1/free-claude-code#1206). include_thoughts alone is not a budget and stays allowed."""
    config = _thinking_config(req)
    if req.body.get("reasoning_effort") is not None and ("thinking_budget" in config or "thinking_level" in config):
        return 400, gemini_body(400, "Expected one of either `reasoning_effort` or custom `thinking_config`; "
                                     "found both.")
    return None


def gemini_reasoning_effort(req: Req) -> Refusal | None:
    """GEMINI-COMPAT maps reasoning_effort minimal/low/medium/high to thinking levels or budgets, and
    "none" turns thinking off "for 2.5 models. Reasoning cannot be turned off for Gemini 2.5 Pro or 3
    models." Observed for that case: 400 "Budget 0 is invalid. This model only works in thinking mode."
    (INVALID_ARGUMENT). The answer to a value outside the table was not found; the text below is
    written here in Gemini's form."""
    effort = req.body.get("reasoning_effort")
    if effort is None:
        return None
    if effort not in ("none", "minimal", "low", "medium", "high"):
        return 400, gemini_body(400, f"Invalid value for reasoning_effort: \"{effort}\". Supported values are "
                                     "none, minimal, low, medium and high.")
    if effort == "none" and (req.model.startswith("gemini-2.5-pro") or req.model.startswith("gemini-3")):
        return 400, gemini_body(400, "Budget 0 is invalid. This model only works in thinking mode.")
    return None


# --- vLLM (VLLM-SERVER, VLLM-TOOLS) ------------------------------------------------------------------
# vLLM validates in ChatCompletionRequest (vllm/entrypoints/openai/chat_completion/protocol.py); its
# validators raise VLLMValidationError, answered 400 with the validator's text in the message.

# VLLM-SERVER "Extra Parameters": fields outside OpenAI's API that ChatCompletionRequest declares (the
# sampling ones, "extra_body" in the OpenAI SDK, at the top level of the JSON body). They are read, not
# ignored. top_k is an integer (SamplingParams: -1 or 0 disables it).
_VLLM_EXTRA = frozenset({"top_k", "min_p", "repetition_penalty", "length_penalty", "stop_token_ids",
                         "include_stop_str_in_output", "ignore_eos", "min_tokens", "skip_special_tokens",
                         "spaces_between_special_tokens", "truncate_prompt_tokens", "prompt_logprobs",
                         "use_beam_search", "echo", "add_generation_prompt", "continue_final_message",
                         "add_special_tokens", "documents", "chat_template", "chat_template_kwargs"})


def vllm_top_k_integer(req: Req) -> Refusal | None:
    """ChatCompletionRequest.top_k: int | None; pydantic answers another type 400 with its own text
    ("Input should be a valid integer", the parameter in the location; exact text of vLLM's wrapping
    not found, the pydantic message is what it carries)."""
    top_k = req.body.get("top_k")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool)):
        return 400, vllm_body(400, "Input should be a valid integer", param="top_k")
    return None


def vllm_tools_not_empty(req: Req) -> Refusal | None:
    """protocol.py check_tool_usage: "`tools` must not be an empty array. Either provide at least one tool
    or omit the field entirely." (parameter tools)."""
    if req.body.get("tools") == []:
        return 400, vllm_body(400, "`tools` must not be an empty array. Either provide at least one tool or omit "
                                   "the field entirely.", param="tools")
    return None


def vllm_tool_choice_requires_tools(req: Req) -> Refusal | None:
    """protocol.py check_tool_usage: "When using `tool_choice`, `tools` must be set." (parameter
    tool_choice; "none" needs no tools) and "The tool specified in `tool_choice` does not match any of
    the specified `tools`"."""
    choice = req.body.get("tool_choice")
    if choice is None or choice == "none":
        return None
    if req.body.get("tools") is None:
        return 400, vllm_body(400, "When using `tool_choice`, `tools` must be set.", param="tool_choice")
    if isinstance(choice, dict):
        name = choice.get("function", {}).get("name") if isinstance(choice.get("function"), dict) else None
        if name not in req.tool_names():
            return 400, vllm_body(400, "The tool specified in `tool_choice` does not match any of the specified "
                                       "`tools`", param="tool_choice")
    return None


def vllm_auto_tool_choice(req: Req) -> Refusal | None:
    """VLLM-TOOLS "Automatic Function Calling": tool_choice "auto" (also the default whenever tools are
    sent) needs the server started with --enable-auto-tool-choice and --tool-call-parser; otherwise 400
    "\\"auto\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set"
    (vllm-project/vllm#9986). Named tool_choice and "required" work without them."""
    if req.sim.auto_tool_choice or not req.body.get("tools"):
        return None
    if req.body.get("tool_choice", "auto") == "auto":
        return 400, vllm_body(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                                   "to be set")
    return None


def prompt_tokens(body: dict[str, Any]) -> int:
    """The simulator's prompt size: len(json.dumps(messages)) // 4."""
    return len(json.dumps(body.get("messages", []))) // 4


def vllm_context_length(req: Req) -> Refusal | None:
    """VLLM-SERVER: prompt + requested completion must fit --max-model-len (the simulator's
    context_length). Observed: "This model's maximum context length is 16384 tokens. However, you
    requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length
    of the messages or completion." (BadRequestError 400, vllm#20409). Newer vLLM words it per
    parameter; the numbers are the check."""
    limit = req.sim.context_length
    prompt = prompt_tokens(req.body)
    wanted = req.body.get("max_completion_tokens") or req.body.get("max_tokens") or 0
    if prompt + wanted > limit:
        return 400, vllm_body(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                                   f"{prompt + wanted} tokens ({prompt} in the messages, {wanted} in the "
                                   "completion). Please reduce the length of the messages or completion.")
    return None


# --- Ollama (OLLAMA-OAI; openai/openai.go, middleware/openai.go, server/routes.go) --------------------


def ollama_messages_not_empty(req: Req) -> Refusal | None:
    """middleware/openai.go ChatMiddleware: 400 "[] is too short - 'messages'"."""
    if req.body.get("messages") == []:
        return 400, ollama_body(400, "[] is too short - 'messages'")
    return None


def ollama_image_input(req: Req) -> Refusal | None:
    """OLLAMA-OAI: images as "Base64 encoded image" only, "[ ] Image URL". openai.go decodeImageURL:
    http(s) URLs -> "image URLs are not currently supported, please use base64 encoded data instead";
    anything but data:image/{jpeg,jpg,png,webp};base64 (or data:;base64) or undecodable base64 ->
    "invalid image input" (so GIF is refused here)."""
    for _, _, url in req.images():
        if url.startswith(("http://", "https://")):
            return 400, ollama_body(400, "image URLs are not currently supported, please use base64 encoded data "
                                         "instead")
        prefix = next((p for p in ("data:;base64,", *(f"data:image/{t};base64," for t in ("jpeg", "jpg", "png", "webp")))
                       if url.startswith(p)), None)
        if prefix is None or b64decode_strict(url[len(prefix):]) is None:
            return 400, ollama_body(400, "invalid image input")
    return None


def ollama_vision(req: Req) -> Refusal | None:
    """Images only for the models in vision_models (Ollama marks them "vision"). Observed from Ollama:
    400 "this model does not support image input" (ollama/ollama#17301, 2026). Older local builds were
    reported to drop the image silently instead (stavsap/comfyui-ollama#57, 2024)."""
    if req.model in req.sim.vision_models:
        return None
    if any(True for _ in req.images()):
        return 400, ollama_body(400, "this model does not support image input")
    return None


def ollama_tools_support(req: Req) -> Refusal | None:
    """server/images.go CheckCapabilities + routes.go: tools to a model without the tools capability ->
    400 "<name> does not support tools" (observed "registry.ollama.ai/library/gemma3:270m does not
    support tools"). tool_models None = every served model takes tools."""
    if req.sim.tool_models is None or req.model in req.sim.tool_models or not req.body.get("tools"):
        return None
    name = req.model if ":" in req.model else f"{req.model}:latest"
    return 400, ollama_body(400, f"registry.ollama.ai/library/{name} does not support tools")


def ollama_reasoning_effort(req: Req) -> Refusal | None:
    """OLLAMA-OAI lists reasoning_effort "high", "medium", "low", "max", "none"; openai.go
    thinkFromReasoningEffort also maps minimal/xhigh/ultra and refuses the rest: 'invalid reasoning value:
    "x" (must be "minimal", "low", "medium", "high", "xhigh", "ultra", "max", or "none")'."""
    reasoning = req.body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else req.body.get("reasoning_effort")
    if effort in (None, "", "none", "minimal", "low", "medium", "high", "max", "xhigh", "ultra"):
        return None
    return 400, ollama_body(400, f'invalid reasoning value: "{effort}" (must be "minimal", "low", "medium", "high", '
                                 '"xhigh", "ultra", "max", or "none")')


def ollama_message_content(req: Req) -> Refusal | None:
    """openai.go FromChatRequest: content null without tool_calls -> "invalid message content type: <nil>";
    FromCompletionToolCall: tool-call arguments that are not JSON -> "invalid tool call arguments"."""
    for m in req.messages():
        if m.get("content") is None and not m.get("tool_calls"):
            return 400, ollama_body(400, "invalid message content type: <nil>")
        for call in m.get("tool_calls") or []:
            try:
                json.loads((call.get("function") or {}).get("arguments", ""))
            except (TypeError, ValueError):
                return 400, ollama_body(400, "invalid tool call arguments")
    return None


# Fields of Ollama's ChatCompletionRequest (openai.go); Go's JSON decoding drops the rest without a word.
# OLLAMA-OAI marks tool_choice, logit_bias, user and n as not supported -- they are ignored, not refused.
_OLLAMA_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "seed", "stop",
                            "temperature", "frequency_penalty", "presence_penalty", "top_p", "response_format",
                            "tools", "reasoning", "reasoning_effort", "logprobs", "top_logprobs"})


# --- llama.cpp (LLAMA-SERVER; llama-cpp-python: LCPP-PY) ---------------------------------------------


def llamacpp_jinja(req: Req) -> Refusal | None:
    """server-common.cpp oaicompat_chat_params_parse: without --jinja (the default is on: "--jinja,
    --no-jinja ... (default: enabled)"), tools -> runtime_error "tools param requires --jinja flag" and a
    tool_choice other than "auto" -> "tool_choice param requires --jinja flag"; runtime_error answers 500
    server_error (observed {"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}})."""
    if req.sim.server != "llama-server" or req.sim.jinja:
        return None
    if req.body.get("tools"):
        return 500, llamacpp_body(500, "tools param requires --jinja flag")
    if req.body.get("tool_choice", "auto") != "auto":
        return 500, llamacpp_body(500, "tool_choice param requires --jinja flag")
    return None


def llamacpp_response_format(req: Req) -> Refusal | None:
    """server-common.cpp: response_format type "json_object" (its schema under "schema") or "json_schema"
    (under json_schema.schema) or "text"; otherwise invalid_argument (400) 'response_format type must be
    one of "text" or "json_object", but got: X'."""
    rf = req.body.get("response_format")
    kind = rf.get("type", "") if isinstance(rf, dict) else ""
    if req.sim.server == "llama-server" and kind not in ("", "text", "json_object", "json_schema"):
        return 400, llamacpp_body(400, f'response_format type must be one of "text" or "json_object", but got: {kind}')
    return None


def llamacpp_message_content(req: Req) -> Refusal | None:
    """server-common.cpp: "All non-assistant messages must contain 'content'" and "Assistant message must
    contain either 'content' or 'tool_calls'!" (invalid_argument, 400); top_logprobs without logprobs:
    "top_logprobs requires logprobs to be set to true"."""
    if req.sim.server != "llama-server":
        return None
    for m in req.messages():
        if m.get("role") != "assistant" and "content" not in m:
            return 400, llamacpp_body(400, "All non-assistant messages must contain 'content'")
        if m.get("role") == "assistant" and "content" not in m and "tool_calls" not in m:
            return 400, llamacpp_body(400, "Assistant message must contain either 'content' or 'tool_calls'!")
    if req.body.get("top_logprobs") is not None and not req.body.get("logprobs"):
        return 400, llamacpp_body(400, "top_logprobs requires logprobs to be set to true")
    return None


def llamacpp_image_input(req: Req) -> Refusal | None:
    """LLAMA-SERVER multimodal needs --mmproj; without it an image is refused 500: {"error":{"code":500,
    "message":"image input is not supported - hint: if this is unexpected, you may need to provide the
    mmproj","type":"server_error"}} (observed, several reports). llama-cpp-python's chat handlers that
    take images are "llava"-style (Llava15ChatHandler); the simulator applies the same mmproj switch."""
    if req.sim.mmproj or not any(True for _ in req.images()):
        return None
    message = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
    if req.sim.server == "llama-cpp-python":
        return 500, {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}
    return 500, llamacpp_body(500, message)


def llamacpp_python_null_content(req: Req) -> Refusal | None:
    """llama-cpp-python: ChatCompletionRequestAssistantMessage.content is NotRequired[str]
    (llama_cpp/llama_types.py), so "content": null fails request validation; its RouteErrorHandler
    (LCPP-PY errors.py) catches every exception and answers 500 {"error": {"message": str(exc), "type":
    "internal_server_error", "param": null, "code": null}}. The message below is the shape of pydantic's
    error list, not a captured one. The project's adapter sends "" there for this reason."""
    if req.sim.server != "llama-cpp-python":
        return None
    for i, m in enumerate(req.messages()):
        if m.get("role") == "assistant" and "content" in m and m["content"] is None:
            detail = (f"[{{'type': 'string_type', 'loc': ('body', 'messages', {i}, 'typed-dict', 'content'), "
                      "'msg': 'Input should be a valid string', 'input': None}]")
            return 500, {"error": {"message": detail, "type": "internal_server_error", "param": None, "code": None}}
    return None


# --- the registry ------------------------------------------------------------------------------------

GATE: list[Rule] = [bearer_key, model_served]
"""Checked first on every profile, in this order."""

PROFILE_RULES: dict[str, list[Rule]] = {
    "openai": [unknown_parameters, *SCHEMA_RULES, reasoning_max_tokens, reasoning_sampling, reasoning_effort_values,
               vision_support, image_limits, json_object_needs_json_word, strict_json_schema],
    "gemini": [gemini_unknown_fields, gemini_effort_or_thinking_config, gemini_reasoning_effort],
    "vllm": [vllm_tools_not_empty, vllm_tool_choice_requires_tools, vllm_auto_tool_choice, vllm_context_length,
             vllm_top_k_integer],
    "ollama": [ollama_messages_not_empty, ollama_image_input, ollama_vision, ollama_tools_support,
               ollama_reasoning_effort, ollama_message_content],
    "llamacpp": [llamacpp_jinja, llamacpp_response_format, llamacpp_message_content, llamacpp_image_input,
                 llamacpp_python_null_content],
}
"""Each service's own rules; the OpenAI schema (SCHEMA_RULES) follows them on the other profiles when
schema_strict is on. The openai profile lists the schema itself."""


def rules_for(profile: str, schema_strict: bool = True) -> list[Rule]:
    own = PROFILE_RULES[profile]
    if profile == "openai" or not schema_strict:
        return [*GATE, *own]
    return [*GATE, *own, *SCHEMA_RULES]


def ignored_fields(sim: SimOpenAI, body: dict[str, Any]) -> list[str]:
    """Fields the real server accepts and silently ignores (recorded in `ignored`, never refused):
    Ollama drops what its request struct lacks (tool_choice, logit_bias, user, n: "[ ]" in OLLAMA-OAI);
    vLLM logs "The following fields were present in the request but ignored" (OpenAIBaseModel, extra
    allowed); llama-server serves its loaded model whatever "model" says."""
    if sim.profile == "ollama":
        return [k for k in body if k not in _OLLAMA_FIELDS]
    if sim.profile == "vllm":
        return [k for k in body if k not in OPENAI_PARAMS and k not in _VLLM_EXTRA]
    if sim.profile == "llamacpp" and "model" in body:
        return ["model"]
    return []


# --- status behaviours, per service ------------------------------------------------------------------


def status_body(sim: SimOpenAI, status: int, message: str | None) -> Any:
    """The body of an injected 429/500/503, in the service's documented shape."""
    if sim.profile == "openai":
        # OPENAI-ERR: 429 "Rate limit reached for requests" (code rate_limit_exceeded), 500 "The server had
        # an error while processing your request. Sorry about that!", 503 "The engine is currently
        # overloaded, please try again later." (type server_error).
        if status == 429:
            return openai_body(message or "Rate limit reached for requests", type="requests",
                               code="rate_limit_exceeded")
        default = {500: "The server had an error while processing your request. Sorry about that!",
                   503: "The engine is currently overloaded, please try again later."}.get(status, "injected failure")
        return openai_body(message or default, type="server_error")
    if sim.profile == "gemini":
        # GEMINI-TS: 429 RESOURCE_EXHAUSTED "Resource has been exhausted (e.g. check quota)." (observed),
        # 500 INTERNAL "An internal error has occurred. Please retry or report in
        # https://developers.generativeai.google/guide/troubleshooting" (as recalled, not re-checked),
        # 503 UNAVAILABLE "The model is overloaded. Please try again later." (google-gemini/gemini-cli#7227).
        default = {429: "Resource has been exhausted (e.g. check quota).",
                   500: "An internal error has occurred. Please retry or report in "
                        "https://developers.generativeai.google/guide/troubleshooting",
                   503: "The model is overloaded. Please try again later."}.get(status, "injected failure")
        return gemini_body(status, message or default)
    if sim.profile == "vllm":
        return vllm_body(status, message or "injected failure")
    if sim.profile == "ollama":
        # server/sched.go ErrMaxQueue answers 503 "server busy, please try again.  maximum pending requests exceeded"
        default = "server busy, please try again.  maximum pending requests exceeded" if status == 503 \
            else "injected failure"
        return ollama_body(status, message or default)
    if sim.server == "llama-cpp-python":
        return {"error": {"message": message or "injected failure", "type": "internal_server_error",
                          "param": None, "code": None}}
    # llama-server: 503 {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}
    return llamacpp_body(status, message or ("Loading model" if status == 503 else "injected failure"))


# --- the server --------------------------------------------------------------------------------------


def _default_script(body: dict[str, Any], n: int) -> Behaviour:
    return {"kind": "text", "text": "ok"}


@dataclass
class SimOpenAI(ServedDouble):
    """The simulator. Context manager: `with SimOpenAI(profile="vllm", auto_tool_choice=True) as sim:`.

    script is called only for requests that pass every rule, n counting accepted requests from 1.
    requests holds every body received; refused one {"status", "body", "request", "rule"} per refusal;
    accepted the bodies answered by the script; ignored one {"request", "field"} per field the real
    server would silently drop (Ollama's tool_choice, ...)."""

    profile: str = "openai"
    script: Callable[[dict[str, Any], int], Behaviour] = _default_script
    api_key: str | None = _PROFILE_DEFAULT
    models: set[str] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    ignored: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    schema_strict: bool = True
    """Hold every profile to the OpenAI request schema (SCHEMA_RULES); off: only each server's own rules."""
    # vllm
    auto_tool_choice: bool = False
    """vLLM started with --enable-auto-tool-choice --tool-call-parser ..."""
    context_length: int = 32768
    """vLLM's --max-model-len."""
    # ollama
    vision_models: set[str] = field(default_factory=lambda: {"qwen2.5vl"})
    tool_models: set[str] | None = None
    # llamacpp
    server: str = "llama-server"
    """"llama-server" (llama.cpp) or "llama-cpp-python" (its Python server, which the project runs)."""
    jinja: bool = True
    mmproj: bool = False
    # openai
    max_images_per_request: int = 1500
    max_image_payload_bytes: int = 512 * 1024 * 1024
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: LocalJsonServer | None = None
    _accepted_n: int = 0

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {self.profile!r}")
        if self.api_key == _PROFILE_DEFAULT:
            self.api_key = "sk-test" if self.profile in ("openai", "gemini") else None
        if self.server not in ("llama-server", "llama-cpp-python"):
            raise ValueError("server must be 'llama-server' or 'llama-cpp-python'")

    @property
    def served_models(self) -> set[str]:
        return DEFAULT_MODELS[self.profile] if self.models is None else self.models

    @property
    def base_path(self) -> str:
        return "/v1beta/openai" if self.profile == "gemini" else "/v1"

    @property
    def base_url(self) -> str:
        return f"{self._url}{self.base_path}"

    def rules(self) -> list[Rule]:
        return rules_for(self.profile, self.schema_strict)

    def check(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, Refusal] | None:
        """The first rule the request breaks, with its answer; None when it passes them all."""
        req = Req(self, body, headers)
        for rule in self.rules():
            refusal = rule(req)
            if refusal is not None:
                return rule.__name__, refusal
        return None

    def _http_server(self) -> LocalJsonServer:
        # A short poll interval: leaving the block waits for the next poll, and tests open many servers.
        return LocalJsonServer(self._handle, self._get, poll_interval=0.02)

    # -- request handling

    def _not_found(self, method: str, path: str) -> Any:
        if self.profile == "openai":
            # OPENAI-ERR: {"error": {"message": "Invalid URL (POST /v1/foo)", "type": "invalid_request_error", ...}}
            return openai_body(f"Invalid URL ({method} {path})")
        return Req(self, {}, {}).refuse(404, f"Not Found: {method} {path}")

    def _get(self, path: str) -> Response:
        return self._send(404, self._not_found("GET", path))

    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        if path.rstrip("/") != f"{self.base_path}/chat/completions":
            return self._send(404, self._not_found("POST", path))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(body if isinstance(body, dict) else {"_raw": raw.decode("utf-8", "replace")})
            self.headers.append(headers)
            index = len(self.requests) - 1
        if not isinstance(body, dict):
            # OPENAI-ERR, observed verbatim: "We could not parse the JSON body of your request. (HINT: This likely
            # means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what
            # was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us
            # through our help center at help.openai.com.)"
            message = ("We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
                       "your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not "
                       "valid JSON. If you have trouble figuring out how to fix this, please contact us through our "
                       "help center at help.openai.com.)")
            return self._refuse("json_body", Req(self, {}, headers).refuse(400, message), self.requests[index])
        found = self.check(body, headers)
        if found is not None:
            return self._refuse(found[0], found[1], body)
        with self._lock:
            for name in ignored_fields(self, body):
                self.ignored.append({"request": index, "field": name})
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
        if behaviour["kind"] == "raw":  # garbage on purpose: an HTML page, a wrong-shaped body
            return self._send(behaviour.get("status", 200), behaviour["body"],
                              content_type=behaviour.get("content_type", "application/json"))
        if behaviour["kind"] == "status":
            status = behaviour["status"]
            extra = {"Retry-After": str(behaviour["retry_after"])} if "retry_after" in behaviour else {}
            return self._send(status, status_body(self, status, behaviour.get("message")), extra_headers=extra)
        return self._send(200, self.completion(behaviour, n, str(body.get("model", ""))))

    def completion(self, behaviour: Behaviour, n: int, model: str) -> dict[str, Any]:
        """A chat.completion for a "text" or "tool" behaviour: FakeOpenAI's payload, plus the service's
        reasoning fields when the behaviour carries "reasoning" or the model is a reasoning model.
        A "message" behaviour ({"kind": "message", "content": str | None, "calls": [{"id", "name",
        "arguments"}]}) is a whole reply: content beside any number of tool calls. OpenAI's message
        object always has `refusal` (null unless the model refused) and `annotations` (OPENAI-REF,
        "The chat completion object": message.refusal, message.annotations): the openai profile
        sends both, after role, content and tool_calls, as the service does."""
        if behaviour["kind"] == "message":
            calls = behaviour.get("calls") or []
            base = {"kind": "text", "text": behaviour.get("content")}
            payload: dict[str, Any] = json.loads(completion_payload(base, n, model))
            choice = payload["choices"][0]
            if calls:
                choice["message"]["tool_calls"] = [
                    {"id": c.get("id", f"call_{n}_{i}"), "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}} for i, c in enumerate(calls)]
                choice["finish_reason"] = "tool_calls"
        else:
            payload = json.loads(completion_payload(behaviour, n, model))
        if self.profile == "openai":
            payload["choices"][0]["message"] |= {"refusal": None, "annotations": []}
        usage = payload["usage"]
        reasoning = behaviour.get("reasoning")
        reasoning_tokens = len(reasoning) // 4 if reasoning else 0
        if self.profile == "openai" and _is_reasoning(model):
            # OPENAI-REAS: usage.completion_tokens_details.reasoning_tokens; the reasoning itself is not returned.
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        elif reasoning:
            message = payload["choices"][0]["message"]
            if self.profile == "ollama":
                message["reasoning"] = reasoning  # openai.go Message.Reasoning
            elif self.profile in ("vllm", "llamacpp"):
                message["reasoning_content"] = reasoning  # vLLM reasoning parsers, llama-server --reasoning-format
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        usage["completion_tokens"] += reasoning_tokens
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return payload

    @staticmethod
    def _send(status: int, payload: Any, *, content_type: str = "application/json",
              extra_headers: dict[str, str] | None = None) -> Response:
        raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        return status, [("Content-Type", content_type), *(extra_headers or {}).items()], raw
