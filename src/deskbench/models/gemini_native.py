"""Gemini through Google's native REST API (`POST /v1beta/models/{model}:generateContent`).

deskbench's `gemini/` provider talks to Gemini's OpenAI-compatible endpoint; this adapter (the
`google/` provider) speaks the API Google's own SDKs use, which the official MADQA agent
(baselines/bm25-mllm-agent/gemini_agent.py, through `google.generativeai`) needs: chat history as
`contents` of `user` and `model` turns, `functionDeclarations`, `functionCall` parts answered by
`functionResponse` parts, page images as `inlineData`, the system prompt as `systemInstruction`,
`generationConfig` for sampling, structured output (`responseMimeType` + `responseSchema`) and
thinking. Reference: https://ai.google.dev/api/generate-content ; the REST shapes (Content, Part,
Schema, FunctionDeclaration) https://ai.google.dev/api/caching .

The body is the one google.generativeai 0.8.6 sends over REST (its generated transport,
google/ai/generativelanguage_v1beta/services/generative_service/transports/rest_base.py): the
query `$alt=json;enum-encoding=int`, so enums go as their numbers both ways (Schema type 6 for
OBJECT, finishReason 10 for MALFORMED_FUNCTION_CALL), camelCase fields, an always-present
`generationConfig` (empty when nothing is set), the key in the `x-goog-api-key` header and the
routing header `x-goog-request-params: model=models/<model>`.
Replies are read with string enums as well (the API's default encoding).

The key comes from GEMINI_API_KEY, else GOOGLE_API_KEY, in the order google.generativeai reads
them (client.py, `configure`); GOOGLE_GEMINI_BASE_URL (the root, as Google's genai SDK and the
Gemini CLI read it) points the adapter elsewhere, e.g. at a local simulator in the tests.

What the translation does, and why:
* The wire alternates strictly: consecutive turns of one role are merged, and a tool result is a
  `functionResponse` part of the next user turn, before whatever that turn holds (the official
  agent sends its function responses, then a label and an image per page, as one user turn).
  The API refuses a function-call turn not answered by as many responses (real 400, "Please
  ensure that the number of function response parts is equal to the number of function call
  parts of the function call turn."); such a refusal belongs to the episode's conversation and is
  not fatal to the run.
* A tool result goes as `{"result": <its text>}`, the shape gemini_agent.py sends.
* JSON Schema (tool parameters, the response schema) becomes the API's Schema: type names as
  Type numbers, `$ref` inlined from `$defs`, keywords the Schema has no field for (e.g.
  `additionalProperties`, refused as "Unknown name") left out.
* Thinking: a reply's thought parts (`thought: true`) are kept as reasoning and not sent back;
  a `thoughtSignature` on a functionCall part travels with that call (ToolCall.signature) and goes
  back on it, as the API requires in a function-calling loop
  (https://ai.google.dev/gemini-api/docs/thought-signatures). A reasoning effort becomes
  `thinkingConfig.thinkingBudget` with the budgets Google's OpenAI-compatible endpoint maps the
  same efforts to (https://ai.google.dev/gemini-api/docs/openai: low 1,024, medium 8,192,
  high 24,576; none 0).
* A finishReason other than STOP or MAX_TOKENS (e.g. MALFORMED_FUNCTION_CALL) comes back as the
  response's finish_reason, by name; a prompt blocked before any candidate as
  "PROMPT_BLOCKED:<reason>". The official SDK raises on both, and gemini_agent.py's loop moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Iterable
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from deskbench.models.capabilities import Capabilities, capabilities
from deskbench.models.image_limits import fit_images
from deskbench.models.sdk_errors import episode_specific, retry_after_seconds
from deskbench.models.types import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    ModelError,
    ProviderRefused,
    Reasoning,
    TextPart,
    ToolCall,
    Usage,
)

API_ROOT = "https://generativelanguage.googleapis.com"
BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
API_VERSION = "v1beta"
ENUMS_AS_NUMBERS = "%24alt=json%3Benum-encoding%3Dint"  # `$alt=json;enum-encoding=int`, as the SDK quotes it

# Schema.type (https://ai.google.dev/api/caching#Type); NULL is the newest
TYPE_NUMBERS = {"string": 1, "number": 2, "integer": 3, "boolean": 4, "array": 5, "object": 6, "null": 7}
# FunctionCallingConfig.mode (https://ai.google.dev/api/caching#Mode): AUTO 1, ANY 2, NONE 3
MODE_NUMBERS = {"auto": 1, "required": 2, "none": 3}
# Candidate.FinishReason by number (generativelanguage v1beta generative_service.proto; 12 is
# "Model generated a tool call but no tools were enabled in the request")
FINISH_NAMES = {0: "FINISH_REASON_UNSPECIFIED", 1: "STOP", 2: "MAX_TOKENS", 3: "SAFETY", 4: "RECITATION",
                5: "OTHER", 6: "LANGUAGE", 7: "BLOCKLIST", 8: "PROHIBITED_CONTENT", 9: "SPII",
                10: "MALFORMED_FUNCTION_CALL", 11: "IMAGE_SAFETY", 12: "UNEXPECTED_TOOL_CALL"}
BLOCK_NAMES = {0: "BLOCK_REASON_UNSPECIFIED", 1: "SAFETY", 2: "OTHER", 3: "BLOCKLIST", 4: "PROHIBITED_CONTENT",
               5: "IMAGE_SAFETY"}
THINKING_BUDGETS = {"none": 0, "low": 1024, "medium": 8192, "high": 24576}

# Schema fields (https://ai.google.dev/api/caching#Schema) taken over from JSON Schema as they are
_SCHEMA_SAME = ("format", "description", "nullable", "enum", "required", "propertyOrdering", "title",
                "minimum", "maximum", "pattern", "example", "default")
_SCHEMA_INT64 = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")

# refusals that belong to one conversation's turns, not to the run's settings (each a real 400)
_TURN_RULES = re.compile(r"function (call|response) (turn|parts)|number of function response parts"
                         r"|contents\.parts must not be empty|alternate between user and model", re.I)


def key_from_env() -> str | None:
    """The key, from the first of KEY_ENVS that is set."""
    return next((os.environ[name] for name in KEY_ENVS if os.environ.get(name)), None)


# --- JSON Schema -> the API's Schema ----------------------------------------------------------
def to_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON Schema object as the API's Schema (see the module docstring)."""
    root = schema if root is None else root
    while isinstance(ref := schema.get("$ref"), str):
        schema = {**_resolve(ref, root), **{k: v for k, v in schema.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the type, nullable
        named = [k for k in kind if k != "null"]
        if len(named) < len(kind):
            out["nullable"] = True
        kind = named[0] if named else "null"
    if isinstance(kind, str) and kind in TYPE_NUMBERS:
        out["type"] = TYPE_NUMBERS[kind]
    elif "enum" in schema:
        out["type"] = TYPE_NUMBERS["string"]
    for key in _SCHEMA_SAME:
        if key in schema and key not in out:
            out[key] = schema[key]
    if "enum" in schema and out.get("type") == TYPE_NUMBERS["string"]:
        out["format"] = "enum"  # Schema.enum: "Possible values of the element of Type.STRING with enum format"
        out["enum"] = [str(v) for v in schema["enum"]]
    for key in _SCHEMA_INT64:  # int64 fields go as JSON strings in the proto mapping, as the SDK sends them
        if isinstance(schema.get(key), int):
            out[key] = str(schema[key])
    if isinstance(props := schema.get("properties"), dict):
        out["properties"] = {name: to_schema(value, root) for name, value in props.items() if isinstance(value, dict)}
    if isinstance(items := schema.get("items"), dict):
        out["items"] = to_schema(items, root)
    if isinstance(any_of := schema.get("anyOf") or schema.get("oneOf"), list):
        variants = [v for v in any_of if isinstance(v, dict)]
        if any(v.get("type") == "null" for v in variants) and len(variants) == 2:  # Optional[X]
            out.update(to_schema(next(v for v in variants if v.get("type") != "null"), root), nullable=True)
        else:
            out["anyOf"] = [to_schema(v, root) for v in variants]
    return out


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    """A local reference ("#/$defs/Citation") in `root`."""
    node: Any = root
    for key in ref.removeprefix("#/").split("/") if ref.startswith("#/") else []:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise ProviderRefused(f"the JSON schema's reference {ref!r} does not resolve; the Gemini API takes no "
                              "external references: inline it")
    return node


# --- ChatRequest -> generateContent body -------------------------------------------------------
def _parts(m: Message) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        return [{"text": m.content}] if m.content else []
    out: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, TextPart):
            if p.text:  # an empty text part is no part
                out.append({"text": p.text})
        elif isinstance(p, ImagePart):
            out.append({"inlineData": {"mimeType": p.mime, "data": p.data_b64}})
    return out


def _call_part(call: ToolCall) -> dict[str, Any]:
    try:
        args = call.parsed()
    except ValueError:
        args = {"_unparsed": call.arguments}
    part: dict[str, Any] = {"functionCall": {"name": call.name, "args": args}}
    if call.signature is not None:
        part["thoughtSignature"] = call.signature
    return part


def to_contents(messages: Iterable[Message]) -> tuple[list[dict[str, Any]], str]:
    """The conversation as `contents` (merged, see the module docstring) and the system text."""
    system: list[str] = []
    names: dict[str, str] = {}  # tool call id -> function name, for the responses
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        if m.role == "system":
            system.append(m.text())
            continue
        if m.role == "assistant":
            role, parts = "model", _parts(m) + [_call_part(c) for c in m.tool_calls]
            names.update((c.id, c.name) for c in m.tool_calls)
        elif m.role == "tool":
            name = names.get(m.tool_call_id or "", m.tool_call_id or "")
            role, parts = "user", [{"functionResponse": {"name": name, "response": {"result": m.text()}}}]
        else:
            role, parts = "user", _parts(m)
        if not parts:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(parts)
        else:
            turns.append((role, parts))
    return [{"parts": parts, "role": role} for role, parts in turns], "\n\n".join(t for t in system if t)


def to_gemini(request: ChatRequest, caps: Capabilities, model_id: str = "the model") -> dict[str, Any]:
    """The generateContent body (the model is in the URL)."""
    contents, system = to_contents(fit_images(request.messages, caps))
    config: dict[str, Any] = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.top_k is not None:
        if not caps.top_k:
            raise ProviderRefused(f"{model_id} takes no topK per the capability table; drop --sampling-top-k")
        config["topK"] = request.top_k
    if request.seed is not None and caps.seed:
        config["seed"] = request.seed
    if request.response_schema is not None:
        if request.tools:
            raise ProviderRefused(f"{model_id} cannot return a response schema in a request with tools (the API "
                                  "refuses function calling with the application/json response type); drop one")
        config["responseMimeType"] = "application/json"
        config["responseSchema"] = to_schema(request.response_schema)
    if request.reasoning_effort is not None:
        if request.reasoning_effort not in caps.reasoning_effort:
            raise ProviderRefused(f"{model_id} does not take reasoning effort {request.reasoning_effort!r}; "
                                  f"use one of {caps.reasoning_effort or 'none'} (or drop --reasoning-effort)")
        config["thinkingConfig"] = {"thinkingBudget": THINKING_BUDGETS[request.reasoning_effort]}
    body: dict[str, Any] = {"contents": contents, "generationConfig": config}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": t.name, "description": t.description, "parameters": to_schema(t.parameters)}
            for t in request.tools]}]
        choice = request.tool_choice
        if choice in MODE_NUMBERS:
            body["toolConfig"] = {"functionCallingConfig": {"mode": MODE_NUMBERS[choice]}}
        elif choice:  # a named tool: ANY, restricted to it
            body["toolConfig"] = {"functionCallingConfig": {"mode": MODE_NUMBERS["required"],
                                                            "allowedFunctionNames": [choice]}}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


# --- generateContent reply -> ChatResponse -----------------------------------------------------
def _enum_name(value: object, names: dict[int, str]) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, str(value))
    return value if isinstance(value, str) else None


def _int(value: object) -> int:
    if isinstance(value, str) and value.isdigit():  # int64 counts may come as strings
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_reply(raw: object, model: str) -> ChatResponse:
    """A GenerateContentResponse as a ChatResponse; a body of the wrong shape is a retryable error."""
    if not isinstance(raw, dict):
        raise ModelError(f"the response is not a JSON object ({type(raw).__name__})", retryable=True)
    usage = Usage(calls=1)
    if isinstance(meta := raw.get("usageMetadata"), dict):
        thoughts = _int(meta.get("thoughtsTokenCount"))
        usage.input_tokens = _int(meta.get("promptTokenCount"))
        usage.output_tokens = _int(meta.get("candidatesTokenCount")) + thoughts  # thinking is billed as output
        usage.reasoning_tokens = thoughts
    reply_model = str(raw.get("modelVersion") or model)
    candidates = raw.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        feedback = raw.get("promptFeedback")
        reason = _enum_name(feedback.get("blockReason"), BLOCK_NAMES) if isinstance(feedback, dict) else None
        if reason:
            return ChatResponse(message=Message(role="assistant"), usage=usage, finish_reason=f"PROMPT_BLOCKED:{reason}",
                                model=reply_model)
        raise ModelError("the response has no candidates", retryable=True)
    candidate = candidates[0] if isinstance(candidates[0], dict) else {}
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    texts: list[TextPart] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        signature = part.get("thoughtSignature") if isinstance(part.get("thoughtSignature"), str) else None
        if part.get("thought") is True:
            reasoning.append(Reasoning(text=str(part.get("text") or ""), signature=signature))
        elif isinstance(call := part.get("functionCall"), dict) and isinstance(call.get("name"), str):
            args = call.get("args")
            call_id = str(call["id"]) if isinstance(call.get("id"), str) else f"call_{len(calls)}"
            calls.append(ToolCall(id=call_id, name=call["name"], arguments=json.dumps(args if args is not None else {}),
                                  signature=signature))
        elif isinstance(part.get("text"), str):
            texts.append(TextPart(text=part["text"]))
    text: str | list[TextPart | ImagePart] = texts[0].text if len(texts) == 1 else list(texts) if texts else ""
    return ChatResponse(message=Message(role="assistant", content=text, tool_calls=calls, reasoning=reasoning),
                        usage=usage, finish_reason=_enum_name(candidate.get("finishReason"), FINISH_NAMES),
                        model=reply_model)


def reply_error(status: int, body: object, headers: Any) -> ModelError:
    """An error reply ({"error": {"code", "message", "status", "details"?}}) as ModelError: 429 and
    5xx are retried (after RetryInfo's delay or Retry-After), refusals of the settings or the key
    stop the run, refusals of one conversation's turns (context, safety, function-call pairing)
    end that episode only."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    detail = (message if isinstance(message, str) and message else str(body)[:200] or f"HTTP {status}").strip()
    grpc = error.get("status") if isinstance(error, dict) else None
    retry_after = retry_after_seconds(headers)
    for d in (error.get("details") if isinstance(error, dict) else None) or []:
        delay = d.get("retryDelay") if isinstance(d, dict) else None
        if isinstance(delay, str) and re.fullmatch(r"\d+(\.\d+)?s", delay):
            retry_after = float(delay[:-1])
    retryable = status in (408, 409, 429) or status >= 500
    fatal = status in (400, 401, 403, 404) and not episode_specific(detail) and not _TURN_RULES.search(detail)
    label = f"HTTP {status} {grpc}" if isinstance(grpc, str) else f"HTTP {status}"
    return ModelError(f"{label}: {detail[:500]}", retryable=retryable, status=status, retry_after=retry_after,
                      fatal=fatal)


def parse_body(raw: bytes) -> object:
    """An answer's body: its JSON, or its text when it is no JSON (a proxy's error page)."""
    try:
        parsed: object = json.loads(raw)
    except ValueError:
        parsed = raw.decode("utf-8", "replace").strip()
    return parsed


class LoopHttp:
    """aiohttp for a client of the Gemini API: one session per event loop (connections belong to
    one loop, and the same model may serve several `asyncio.run`s: a run, then its judge), the
    environment's proxy (HTTP(S)_PROXY / NO_PROXY) for `url`, looked up once, and a request that
    does not get through as a retryable ModelError. GeminiNative's and its batch mode's."""

    def __init__(self, url: str, timeout: float) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxy: URL | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        with contextlib.suppress(LookupError):
            self._proxy, self._proxy_auth = get_env_proxy_for_url(URL(url))

    def _session_here(self) -> aiohttp.ClientSession:
        """The session of the running event loop."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._discard()
            self._session = aiohttp.ClientSession(timeout=self._timeout)
            self._loop = loop
        return self._session

    def _discard(self) -> None:
        """Forget a session whose loop is gone, closing its pooled connections without awaiting."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            connector = session.connector
            session.detach()
            if connector is not None:
                connector._close()

    async def send(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes, Any]:
        """The answer's status, body and headers."""
        try:
            async with self._session_here().request(method, URL(url, encoded=True), data=data, headers=headers,
                                                    proxy=self._proxy, proxy_auth=self._proxy_auth) as response:
                return response.status, await response.read(), response.headers
        except TimeoutError as exc:
            raise ModelError("request timed out", retryable=True) from exc
        except aiohttp.ClientError as exc:
            raise ModelError(f"connection failed: {exc or type(exc).__name__}", retryable=True) from exc

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._discard()
        self._loop = None


class GeminiNative:
    """A Gemini model on the native generateContent endpoint, one aiohttp session per event loop."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0, id: str | None = None) -> None:
        key = api_key or key_from_env()
        if not key:
            from deskbench.errors import UserError

            raise UserError(f"google/{model} needs an API key: set {' or '.join(KEY_ENVS)} in the environment")
        self.model = model.removeprefix("models/")
        self.id = id or f"google/{self.model}"
        self.caps = capabilities(self.id)
        root = (base_url or os.environ.get(BASE_URL_ENV) or API_ROOT).rstrip("/")
        self.url = f"{root}/{API_VERSION}/models/{self.model}:generateContent?{ENUMS_AS_NUMBERS}"
        # the SDK's headers that matter to the API: the key, JSON, and its routing parameter
        self._headers = {"x-goog-api-key": key, "content-type": "application/json",
                         "x-goog-request-params": f"model=models/{self.model}"}
        self._http = LoopHttp(self.url, timeout)

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return to_gemini(request, self.caps, self.id)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        data = json.dumps(self.body(request), ensure_ascii=False, separators=(",", ":")).encode()
        status, raw, headers = await self._http.send("POST", self.url, data, self._headers)
        parsed = parse_body(raw)
        if status >= 400:
            raise reply_error(status, parsed, headers)
        return parse_reply(parsed, self.model)

    async def aclose(self) -> None:
        await self._http.aclose()
