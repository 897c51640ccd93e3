"""A strict local simulator of Gemini's native API (POST /v1beta/models/{model}:generateContent),
for the tests.

Like tests/sim_anthropic.py: a fake server that accepts what the real API refuses proves nothing,
so every request passes through RULES before the test's script is asked for a reply. Each rule is
one the API documents or is seen to answer with, and names its source beside it: the reference
page, and the exact error text quoted from a real API response pasted into a public issue. Where
no text was found the comment says so and the message is the nearest form the API uses; tests
should not pin those. Errors have the API's shape, {"error": {"code", "message", "status"}}
(https://ai.google.dev/gemini-api/docs/troubleshooting lists the statuses: 400
INVALID_ARGUMENT / FAILED_PRECONDITION, 403 PERMISSION_DENIED, 404 NOT_FOUND, 429
RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED).

The REST surface modelled (https://ai.google.dev/api/generate-content, https://ai.google.dev/api/caching):
* The key in the `x-goog-api-key` header or the `key` query parameter
  (https://ai.google.dev/gemini-api/docs/api-key: "x-goog-api-key: $GEMINI_API_KEY").
* The body is proto JSON: field names in lowerCamelCase or as the proto's snake_case (the proto
  JSON mapping accepts both, https://protobuf.dev/programming-guides/json/), enums as names or
  numbers. `$alt=json;enum-encoding=int` in the query (what google.generativeai's REST transport
  sends) asks for numbers in the reply, as the API's system parameters do.
* Roles "user" and "model"; function calls answered by as many function responses in the next
  turn; a functionCall in a reply to a request without tools is finishReason
  UNEXPECTED_TOOL_CALL (12), as the v1beta proto documents ("Model generated a tool call but no
  tools were enabled in the request").

Usage:

    with SimGeminiNative(script=lambda body, n: {"kind": "text", "text": "hi"}) as sim:
        os.environ["GOOGLE_GEMINI_BASE_URL"] = sim.base_url
"""

from __future__ import annotations

import json
import re
import secrets
import string
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from http_double import LocalJsonServer, Response, ServedDouble, b64decode_strict

Behaviour = dict[str, Any]
"""What the script answers for an accepted request:
{"kind": "text", "text": str}
| {"kind": "calls", "calls": [{"name": str, "args": dict, "signature"?: str}], "text"?: str}  (text first)
| {"kind": "finish", "reason": "MALFORMED_FUNCTION_CALL" | "SAFETY" | ..., "text"?: str}  (a candidate
  that stopped for that reason, with the text as its content if given, else none)
| {"kind": "blocked", "reason": "SAFETY" | ...}  (the prompt blocked: promptFeedback, no candidate)
| {"kind": "status", "status": 429 | 500 | 503 | ..., "message"?: str, "retry_delay"?: "2s"}
| {"kind": "slow", "seconds": float, "then": Behaviour}
| {"kind": "raw", "body": str | dict, "status"?: int, "content_type"?: str}
Optional on text and calls: "thinking" (a thought part first, with a signature),
"input_tokens", "output_tokens", "thoughts_tokens"."""

Refusal = tuple[int, dict[str, Any]]

# --- documentation pages cited below ------------------------------------------------------------
GENERATE = "https://ai.google.dev/api/generate-content"
SHAPES = "https://ai.google.dev/api/caching"  # Content, Part, Blob, Tool, Schema, ...
FUNCTIONS = "https://ai.google.dev/gemini-api/docs/function-calling"
IMAGES = "https://ai.google.dev/gemini-api/docs/image-understanding"
THINKING = "https://ai.google.dev/gemini-api/docs/thinking"
STRUCTURED = "https://ai.google.dev/gemini-api/docs/structured-output"
TROUBLESHOOTING = "https://ai.google.dev/gemini-api/docs/troubleshooting"
MODELS = "https://ai.google.dev/gemini-api/docs/models"

MAX_REQUEST_BYTES = 20 * 1024 * 1024  # IMAGES: inline data "when the total request size is less than 20MB"
IMAGE_MIMES = {"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}  # IMAGES, "Supported image formats"

STATUS_NAMES = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}  # TROUBLESHOOTING

TYPES = ("TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL")  # SHAPES, Type
MODES = ("MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED")  # SHAPES, FunctionCallingConfig.Mode
FINISH = ("FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "LANGUAGE",
          "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "IMAGE_SAFETY",
          "UNEXPECTED_TOOL_CALL")  # v1beta generative_service.proto, Candidate.FinishReason, by number
BLOCK = ("BLOCK_REASON_UNSPECIFIED", "SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY")


@dataclass(frozen=True)
class ModelSpec:
    """What the simulator needs to know of a model, from its page under MODELS and THINKING."""

    max_output: int  # "Output token limit"
    thinking: tuple[int, int] | None  # the thinkingBudget range; None: the model does not think
    can_disable_thinking: bool = True  # thinkingBudget 0 accepted


# MODELS: 2.0 Flash 8,192 output tokens, 2.5 models 65,536. THINKING, "Set budget": 2.5 Pro
# 128-32768 and "Cannot disable thinking"; 2.5 Flash 0-24576; 2.5 Flash-Lite 512-24576 (0 turns
# it off). gemini-2.0-flash-exp is the official MADQA agent's default model (gemini_agent.py).
_FLASH_20 = ModelSpec(8_192, None)
MODEL_SPECS: dict[str, ModelSpec] = {
    "gemini-2.0-flash": _FLASH_20,
    "gemini-2.0-flash-001": _FLASH_20,
    "gemini-2.0-flash-exp": _FLASH_20,
    "gemini-2.5-flash": ModelSpec(65_536, (1, 24_576)),
    "gemini-2.5-flash-lite": ModelSpec(65_536, (512, 24_576)),
    "gemini-2.5-pro": ModelSpec(65_536, (128, 32_768), can_disable_thinking=False),
}

# Proto messages' fields (SHAPES and GENERATE), by their JSON names; each also accepted in
# snake_case. A value of None: a google.protobuf.Struct or Value, anything goes inside.
_SCHEMA = "Schema"
MESSAGES: dict[str, dict[str, str | None]] = {
    "GenerateContentRequest": {"model": "", "contents": "Content", "tools": "Tool", "toolConfig": "ToolConfig",
                               "safetySettings": "SafetySetting", "systemInstruction": "Content",
                               "generationConfig": "GenerationConfig", "cachedContent": ""},
    "Content": {"role": "", "parts": "Part"},
    "Part": {"text": "", "inlineData": "Blob", "functionCall": "FunctionCall", "functionResponse": "FunctionResponse",
             "fileData": "FileData", "executableCode": "", "codeExecutionResult": "", "thought": "",
             "thoughtSignature": "", "videoMetadata": "", "partMetadata": None},
    "Blob": {"mimeType": "", "data": ""},
    "FileData": {"mimeType": "", "fileUri": ""},
    "FunctionCall": {"id": "", "name": "", "args": None},
    "FunctionResponse": {"id": "", "name": "", "response": None, "willContinue": "", "scheduling": "", "parts": ""},
    "Tool": {"functionDeclarations": "FunctionDeclaration", "googleSearchRetrieval": None, "codeExecution": None,
             "googleSearch": None, "urlContext": None, "computerUse": None, "fileSearch": None, "googleMaps": None},
    "FunctionDeclaration": {"name": "", "description": "", "parameters": _SCHEMA, "parametersJsonSchema": None,
                            "response": _SCHEMA, "responseJsonSchema": None, "behavior": ""},
    _SCHEMA: {"type": "", "format": "", "title": "", "description": "", "nullable": "", "enum": "",
              "maxItems": "", "minItems": "", "properties": _SCHEMA, "required": "", "minProperties": "",
              "maxProperties": "", "minLength": "", "maxLength": "", "pattern": "", "example": None,
              "anyOf": _SCHEMA, "propertyOrdering": "", "default": None, "items": _SCHEMA, "minimum": "",
              "maximum": ""},
    "ToolConfig": {"functionCallingConfig": "FunctionCallingConfig", "retrievalConfig": None},
    "FunctionCallingConfig": {"mode": "", "allowedFunctionNames": ""},
    "SafetySetting": {"category": "", "threshold": ""},
    "GenerationConfig": {"stopSequences": "", "responseMimeType": "", "responseSchema": _SCHEMA,
                         "responseJsonSchema": None, "responseModalities": "", "candidateCount": "",
                         "maxOutputTokens": "", "temperature": "", "topP": "", "topK": "", "seed": "",
                         "presencePenalty": "", "frequencyPenalty": "", "responseLogprobs": "", "logprobs": "",
                         "enableEnhancedCivicAnswers": "", "speechConfig": None,
                         "thinkingConfig": "ThinkingConfig", "mediaResolution": "", "imageConfig": None},
    "ThinkingConfig": {"includeThoughts": "", "thinkingBudget": "", "thinkingLevel": ""},
}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def error_body(status: int, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The API's error shape (TROUBLESHOOTING; every real body quoted below has it)."""
    error: dict[str, Any] = {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}
    if details:
        error["details"] = details
    return {"error": error}


def bad(message: str) -> Refusal:
    return 400, error_body(400, message)


def field_error(path: str, message: str) -> Refusal:
    """The form of a field validation: "* GenerateContentRequest.<path>: <message>\\n" (the real
    bodies quoted at each rule)."""
    return bad(f"* GenerateContentRequest.{path}: {message}\n")


@dataclass
class Ctx:
    body: dict[str, Any]  # with every field name in camelCase (see normalised)
    model: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    sim: SimGeminiNative

    @property
    def spec(self) -> ModelSpec:
        return MODEL_SPECS[self.model]

    @property
    def contents(self) -> list[dict[str, Any]]:
        return self.body.get("contents") or []

    def parts(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        for i, c in enumerate(self.contents):
            for j, p in enumerate(c.get("parts") or []):
                yield i, j, p

    def declarations(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        for i, t in enumerate(self.body.get("tools") or []):
            for j, d in enumerate(t.get("functionDeclarations") or []):
                yield i, j, d

    @property
    def config(self) -> dict[str, Any]:
        return self.body.get("generationConfig") or {}


def normalised(value: Any, message: str | None, path: str) -> tuple[Any, str | None]:
    """`value` (of proto message `message`) with field names in camelCase, or the first unknown
    field as the API's parse error. Text: 'Invalid JSON payload received. Unknown name "id" at
    'contents[7].parts[0].function_response': Cannot find field.' (google-gemini/gemini-cli#13972;
    the path in proto field names); at the top level without the "at" clause: 'Invalid JSON
    payload received. Unknown name "google": Cannot find field.' (Alishahryar1/free-claude-code#542);
    schema map entries as 'properties[3].value' (danny-avila/LibreChat#11761)."""
    if message is None or message == "":
        return value, None
    if isinstance(value, list):
        out = []
        for k, item in enumerate(value):
            item, err = normalised(item, message, f"{path}[{k}]")
            if err:
                return None, err
            out.append(item)
        return out, None
    if not isinstance(value, dict):
        where = f" at '{path}'" if path else ""
        return None, f"Invalid JSON payload received. Expected an object{where}."  # text not found
    fields = MESSAGES[message]
    result: dict[str, Any] = {}
    for key, inner in value.items():
        name = camel(key)
        if name not in fields:
            where = f" at '{path}'" if path else ""
            return None, f'Invalid JSON payload received. Unknown name "{key}"{where}: Cannot find field.'
        sub = f"{path}.{snake(name)}" if path else snake(name)
        if message == _SCHEMA and name == "properties" and isinstance(inner, dict):
            props = {}
            for k, (prop, schema) in enumerate(inner.items()):
                schema, err = normalised(schema, _SCHEMA, f"{sub}[{k}].value")
                if err:
                    return None, err
                props[prop] = schema
            result[name] = props
            continue
        inner, err = normalised(inner, fields[name], sub)
        if err:
            return None, err
        result[name] = inner
    return result, None


# --- the rules, in the order the simulator applies them; the first refusal answers -------------
RULES: list[tuple[str, Callable[[Ctx], Refusal | None]]] = []


def rule(fn: Callable[[Ctx], Refusal | None]) -> Callable[[Ctx], Refusal | None]:
    RULES.append((fn.__name__, fn))
    return fn


@rule
def contents_given(ctx: Ctx) -> Refusal | None:
    # GENERATE: contents is required. Text "contents is not specified" (real 400 quoted in
    # NousResearch/hermes-agent#57942), in the field-error form.
    if not ctx.contents:
        return field_error("contents", "contents is not specified")
    return None


@rule
def role_valid(ctx: Ctx) -> Refusal | None:
    # SHAPES, Content.role: "Must be either 'user' or 'model'". Text "Please use a valid role:
    # user, model." (real bodies: router-for-me/CLIProxyAPI#17, langbot-app/LangBot#1486). A
    # missing role is refused too in a multi-turn request (CLIProxyAPI#17's body had none) but
    # google.generativeai's generate_content sends single-turn requests without one; only a role
    # that is present is checked here.
    for c in ctx.contents:
        if "role" in c and c["role"] not in ("user", "model"):
            return bad("Please use a valid role: user, model.")
    return None


@rule
def parts_nonempty(ctx: Ctx) -> Refusal | None:
    # Text "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n"
    # (real 400, egoist/chatwise-releases#250; vercel/ai#3775).
    for i, c in enumerate(ctx.contents):
        if not c.get("parts"):
            return field_error(f"contents[{i}].parts", "contents.parts must not be empty.")
    return None


_DATA = ("text", "inlineData", "functionCall", "functionResponse", "fileData", "executableCode", "codeExecutionResult")


@rule
def part_has_data(ctx: Ctx) -> Refusal | None:
    # SHAPES, Part: a oneof `data`. Text "* GenerateContentRequest.contents[33].parts[0].data:
    # required oneof field 'data' must have one initialized field\n" (real 400,
    # boldsoftware/sketch#68; 54xzh/FLIT#70). Two members set at once fail at parsing; that
    # text was not found ('Oneof field' form used).
    for i, j, p in ctx.parts():
        present = [k for k in _DATA if k in p]
        if not present:
            return field_error(f"contents[{i}].parts[{j}].data", "required oneof field 'data' must have one initialized field")
        if len(present) > 1:
            return bad(f"Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '{present[1]}'")
    return None


@rule
def bytes_are_base64(ctx: Ctx) -> Refusal | None:
    # Bytes fields are base64 in proto JSON. Text "Invalid value at
    # 'contents[2].parts[0].inline_data.data' (TYPE_BYTES), Base64 decoding failed for \"...\""
    # (real 400, bobrware/bobrchat#135; the thought_signature form in google-gemini/gemini-cli#8003).
    for i, j, p in ctx.parts():
        for name, value in (("inline_data.data", (p.get("inlineData") or {}).get("data")),
                            ("thought_signature", p.get("thoughtSignature"))):
            if value is None:
                continue
            if not isinstance(value, str) or b64decode_strict(value.replace("-", "+").replace("_", "/")) is None:
                return bad(f"Invalid value at 'contents[{i}].parts[{j}].{name}' (TYPE_BYTES), "
                           f'Base64 decoding failed for "{str(value)[:60]}"')
    return None


@rule
def image_mime_supported(ctx: Ctx) -> Refusal | None:
    # IMAGES, "Supported image formats": PNG, JPEG, WEBP, HEIC, HEIF. The refusal of another
    # image type: text not found ("Unsupported MIME type: <type>" is the form third parties quote).
    for _i, _j, p in ctx.parts():
        mime = (p.get("inlineData") or {}).get("mimeType")
        if isinstance(mime, str) and mime.startswith("image/") and mime not in IMAGE_MIMES:
            return bad(f"Unsupported MIME type: {mime}")
    return None


def _call_counts(content: dict[str, Any]) -> tuple[int, int]:
    parts = content.get("parts") or []
    return (sum("functionCall" in p for p in parts), sum("functionResponse" in p for p in parts))


@rule
def function_call_turn_follows_user(ctx: Ctx) -> Refusal | None:
    # FUNCTIONS: the model's function call follows the user's prompt or a function response.
    # Text "Please ensure that function call turn comes immediately after a user turn or after a
    # function response turn." (real 400s: google-gemini/gemini-cli#11814, a history starting with
    # a function call; continuedev/continue#11164).
    for i, c in enumerate(ctx.contents):
        if c.get("role") == "model" and _call_counts(c)[0] and (
                i == 0 or ctx.contents[i - 1].get("role") != "user"):
            return bad("Please ensure that function call turn comes immediately after a user turn or "
                       "after a function response turn.")
    return None


@rule
def function_response_follows_call(ctx: Ctx) -> Refusal | None:
    # Text "Please ensure that function response turn comes immediately after a function call
    # turn." (real 400s: GoogleCloudPlatform/generative-ai#368, langchain-ai/langchain#27799).
    for i, c in enumerate(ctx.contents):
        if _call_counts(c)[1] and (i == 0 or not _call_counts(ctx.contents[i - 1])[0]):
            return bad("Please ensure that function response turn comes immediately after a function call turn.")
    return None


@rule
def function_responses_match_calls(ctx: Ctx) -> Refusal | None:
    # Every function call of a model turn is answered, in the next turn, by one function response.
    # Text "Please ensure that the number of function response parts is equal to the number of
    # function call parts of the function call turn." (real 400s: google-gemini/gemini-cli#4504,
    # #6513 on gemini-2.5-pro). A call left unanswered (the next turn a plain user message) is
    # refused the same way: "Gemini models strictly require a 1:1 pairing between function_call and
    # function_response messages", with that 400 (microsoft/vscode#299295); a user typing while a
    # call was pending got it (google-gemini/gemini-cli#16576). A call in the last turn (a model
    # turn ending the request) has nothing to answer it yet and is not checked.
    for i, c in enumerate(ctx.contents[:-1]):
        calls = _call_counts(c)[0]
        if calls and c.get("role") == "model" and _call_counts(ctx.contents[i + 1])[1] != calls:
            return bad("Please ensure that the number of function response parts is equal to the number of "
                       "function call parts of the function call turn.")
    return None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")


@rule
def function_names_valid(ctx: Ctx) -> Refusal | None:
    # FUNCTIONS: names "must start with a letter or an underscore", a-z, A-Z, 0-9, underscores,
    # dots, dashes (colons are accepted too), at most 64. Text "* GenerateContentRequest.tools[0].
    # function_declarations[18].name: Invalid function name. Must start with a letter or an
    # underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or
    # dashes (-), with a maximum length of 64.\n" (real 400, google-gemini/gemini-cli#9535).
    for i, j, d in ctx.declarations():
        if not isinstance(d.get("name"), str) or not _NAME.fullmatch(d["name"]):
            return field_error(f"tools[{i}].function_declarations[{j}].name",
                               "Invalid function name. Must start with a letter or an underscore. Must be alphameric "
                               "(a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum "
                               "length of 64.")
    return None


def _type_name(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(TYPES):
        return TYPES[value]
    return value if value in TYPES else None


def _schema_errors(schema: dict[str, Any], path: str) -> Iterator[str]:
    """The Schema rules (SHAPES, Schema): a known type; properties only on OBJECT, and then not
    empty; items on ARRAY. Texts: "...parameters.properties: should be non-empty for OBJECT type"
    (real 400, AstrBotDevs/AstrBot#288, browser-use/browser-use#3786), "...properties[data].
    properties: only allowed for OBJECT type" (real 400, anomalyco/opencode#11889). An unknown type
    name: text not found."""
    kind = _type_name(schema.get("type", "TYPE_UNSPECIFIED"))
    if kind is None:
        yield f"Invalid value at '{path}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), {json.dumps(schema.get('type'))}"
        return
    props = schema.get("properties")
    if props is not None and kind != "OBJECT":
        yield f"* GenerateContentRequest.{path}.properties: only allowed for OBJECT type\n"
    if kind == "OBJECT" and not props and "anyOf" not in schema:
        yield f"* GenerateContentRequest.{path}.properties: should be non-empty for OBJECT type\n"
    for name, sub in (props or {}).items():
        yield from _schema_errors(sub, f"{path}.properties[{name}]")
    if isinstance(schema.get("items"), dict):
        yield from _schema_errors(schema["items"], f"{path}.items")
    for k, sub in enumerate(schema.get("anyOf") or []):
        yield from _schema_errors(sub, f"{path}.any_of[{k}]")


@rule
def schemas_valid(ctx: Ctx) -> Refusal | None:
    for i, j, d in ctx.declarations():
        if isinstance(d.get("parameters"), dict):
            for error in _schema_errors(d["parameters"], f"tools[{i}].function_declarations[{j}].parameters"):
                return bad(error)
    if isinstance(ctx.config.get("responseSchema"), dict):
        for error in _schema_errors(ctx.config["responseSchema"], "generation_config.response_schema"):
            return bad(error)
    return None


@rule
def calling_mode_known(ctx: Ctx) -> Refusal | None:
    # SHAPES, FunctionCallingConfig.mode: AUTO, ANY, NONE, VALIDATED. A wrong value: text not
    # found (the proto JSON "Invalid value" form).
    mode = ((ctx.body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    if mode is not None and not (mode in MODES or (isinstance(mode, int) and 0 <= mode < len(MODES))):
        return bad("Invalid value at 'tool_config.function_calling_config.mode' "
                   f"(type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), {json.dumps(mode)}")
    return None


@rule
def no_json_mime_with_functions(ctx: Ctx) -> Refusal | None:
    # STRUCTURED / FUNCTIONS: function calling and a JSON response type do not combine. Text
    # "Function calling with a response mime type: 'application/json' is unsupported" (real 400,
    # googleapis/python-genai#867, symfony/ai#803).
    if ctx.config.get("responseMimeType") == "application/json" and any(True for _ in ctx.declarations()):
        return bad("Function calling with a response mime type: 'application/json' is unsupported")
    return None


@rule
def response_schema_needs_json(ctx: Ctx) -> Refusal | None:
    # GENERATE, GenerationConfig.responseSchema: "If set, a compatible responseMimeType must also
    # be set. Compatible MIME types: application/json". Text not found.
    if "responseSchema" in ctx.config and ctx.config.get("responseMimeType") != "application/json":
        return field_error("generation_config.response_mime_type",
                           "response_mime_type must be application/json when response_schema is set.")
    return None


@rule
def temperature_in_range(ctx: Ctx) -> Refusal | None:
    # GENERATE, GenerationConfig.temperature: "Values can range from [0.0, 2.0]". Text not found.
    t = ctx.config.get("temperature")
    if t is not None and not (isinstance(t, int | float) and 0 <= t <= 2):
        return field_error("generation_config.temperature", "temperature must be in the range [0.0, 2.0].")
    return None


@rule
def top_k_integer(ctx: Ctx) -> Refusal | None:
    # GENERATE, GenerationConfig.topK: "Optional. The maximum number of tokens to consider when
    # sampling." (an integer, int32 in proto JSON). A fraction is a proto JSON parse failure, in the
    # form of the TYPE_BYTES one above: "Invalid value at 'generation_config.top_k' (TYPE_INT32), 2.5".
    # Below 1: text not found, not refused here.
    k = ctx.config.get("topK")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int | float) or int(k) != k):
        return bad(f"Invalid value at 'generation_config.top_k' (TYPE_INT32), {json.dumps(k)}")
    return None


@rule
def max_output_in_range(ctx: Ctx) -> Refusal | None:
    # MODELS, "Output token limit" per model. Above it: text not found (the API is seen to clamp
    # or refuse depending on the model; refused here, the stricter reading). Below 1: text not found.
    mot = ctx.config.get("maxOutputTokens")
    if mot is None:
        return None
    if not isinstance(mot, int) or isinstance(mot, bool) or mot < 1:
        return field_error("generation_config.max_output_tokens", "max_output_tokens must be positive.")
    if mot > ctx.spec.max_output:
        return bad(f"The maximum number of output tokens for {ctx.model} is {ctx.spec.max_output}, "
                   f"but {mot} was requested.")
    return None


@rule
def thinking_supported(ctx: Ctx) -> Refusal | None:
    # THINKING: 2.0 models do not think. Text "Unable to submit request because thinking is not
    # supported by this model. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/
    # model-reference/gemini" (real 400 for gemini-2.0-flash-exp, googleapis/js-genai#681).
    if "thinkingConfig" in ctx.config and ctx.spec.thinking is None:
        return bad("Unable to submit request because thinking is not supported by this model. Learn more: "
                   "https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/gemini")
    return None


@rule
def thinking_budget_in_range(ctx: Ctx) -> Refusal | None:
    # THINKING, "Set budget" (see ModelSpec). Texts: "Budget 0 is invalid. This model only works
    # in thinking mode." (real 400 on gemini-2.5-pro, snailyp/gemini-balance#206); "The thinking
    # budget (52428) is invalid." (real 400, RooCodeInc/Roo-Code#4399). -1 is dynamic thinking.
    budget = (ctx.config.get("thinkingConfig") or {}).get("thinkingBudget")
    if budget is None or ctx.spec.thinking is None or budget == -1:
        return None
    if budget == 0:
        return None if ctx.spec.can_disable_thinking else bad("Budget 0 is invalid. This model only works in thinking mode.")
    low, high = ctx.spec.thinking
    if not isinstance(budget, int) or not low <= budget <= high:
        return bad(f"The thinking budget ({budget}) is invalid.")
    return None


# --- the server --------------------------------------------------------------------------------
_ALNUM = string.ascii_letters + string.digits
_PATH = re.compile(r"/v1beta/models/([^/:]+):generateContent")


def _text_default(body: dict[str, Any], n: int) -> Behaviour:
    return {"kind": "text", "text": "ok"}


@dataclass
class SimGeminiNative(ServedDouble):
    """Context manager: `with SimGeminiNative() as sim:`; point the adapter at sim.base_url."""

    script: Callable[[dict[str, Any], int], Behaviour] = _text_default
    api_key: str = "test-gemini-key"
    models: set[str] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # of each request's answer, in order
    refused: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    script_errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _server: LocalJsonServer | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.models = set(MODEL_SPECS if self.models is None else self.models)
        unknown = self.models - set(MODEL_SPECS)
        if unknown:
            raise ValueError(f"no ModelSpec for {sorted(unknown)}: add it to MODEL_SPECS with its documented limits")

    @property
    def base_url(self) -> str:
        """The API root, as GOOGLE_GEMINI_BASE_URL takes it."""
        return self._url

    def check(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[str, Refusal] | None:
        """The first rule that refuses the request, as (rule name, (status, body)), or None."""
        return self.evaluate(path, {k.lower(): v for k, v in headers.items()}, raw)[0]

    def evaluate(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[tuple[str, Refusal] | None, Ctx | None]:
        """(the first refusal as (rule name, (status, body)), or None; the request's Ctx when it got
        as far as the rules): the checks without a server, for the recorder of the official
        requests (scripts/official_requests/record_gemini.py), which answers as this does."""
        url = urlsplit(path)
        query = parse_qs(url.query)
        match = _PATH.fullmatch(unquote(url.path))
        if match is None:
            # Text not found for an unknown method path (the real API answers an HTML 404 page).
            return ("path", (404, error_body(404, f"Method not found: {url.path}"))), None
        key = headers.get("x-goog-api-key") or (query.get("key") or [None])[0]
        if not key:
            # Text: real 403 in google-gemini/deprecated-generative-ai-python#463 and
            # PublicAffairs/openai-gemini#92.
            return ("api_key_present", (403, error_body(403, "Method doesn't allow unregistered callers (callers without "
                                                        "established identity). Please use API Key or other form of API "
                                                        "consumer identity to call this API."))), None
        if key != self.api_key:
            # Text and details: real 400 in continuedev/continue#8516 (and google/timesketch#3703).
            return ("api_key_valid", (400, error_body(400, "API key not valid. Please pass a valid API key.", [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                 "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]))), None
        model = match.group(1)
        assert self.models is not None
        if model not in self.models:
            # Text: real 404 in wwardaww/gnome-gemini-ai#21 and swuecho/chat#597.
            return ("model_served", (404, error_body(404, f"models/{model} is not found for API version v1beta, or is not "
                                                     "supported for generateContent. Call ListModels to see the list of "
                                                     "available models and their supported methods."))), None
        if len(raw) > MAX_REQUEST_BYTES:
            # IMAGES: 20 MB in all. Text: the API's "Request payload size exceeds the limit: <n>
            # bytes." (real 400 with another limit, google-gemini/deprecated-generative-ai-android#26).
            return ("request_size", bad(f"Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes.")), None
        try:
            body = json.loads(raw)
        except ValueError:
            # Text not found ("Invalid JSON payload received." is the prefix of every parse error).
            return ("body_is_json", bad("Invalid JSON payload received. Unexpected token.")), None
        if not isinstance(body, dict):
            return ("body_is_json", bad("Invalid JSON payload received. Expected an object.")), None
        normal, err = normalised(body, "GenerateContentRequest", "")
        if err:
            return ("known_fields", bad(err)), None
        ctx = Ctx(normal, model, query, headers, self)
        for name, fn in RULES:
            refusal = fn(ctx)
            if refusal is not None:
                return (name, refusal), ctx
        return None, ctx

    # --- request handling ------------------------------------------------------------------
    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        response = self._respond(path, headers, raw)
        with self._lock:
            self.statuses.append(response[0])
        return response

    def _respond(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(body if isinstance(body, dict) else {"_raw": raw[:2000].decode("utf-8", "replace")})
            self.paths.append(path)
            self.headers.append(headers)
        verdict, ctx = self.evaluate(path, headers, raw)
        if verdict is not None:
            name, (status, payload) = verdict
            with self._lock:
                self.refused.append({"status": status, "body": payload, "request": body, "rule": name})
            return self._send_json(status, payload)
        assert ctx is not None
        with self._lock:
            self.accepted.append(body)
            n = len(self.accepted)
        try:
            return self._answer(ctx, self.script(ctx.body, n))
        except Exception as exc:  # noqa: BLE001 -- a broken script is a test bug; say so loudly
            with self._lock:
                self.script_errors.append(f"{type(exc).__name__}: {exc}")
            return self._send_json(500, error_body(500, f"simulator script error: {type(exc).__name__}: {exc}"))

    @staticmethod
    def _send_json(status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> Response:
        headers = [("Content-Type", "application/json; charset=UTF-8"), *(extra or {}).items()]
        return status, headers, json.dumps(payload, indent=2).encode()

    def _answer(self, ctx: Ctx, behaviour: Behaviour) -> Response:
        while behaviour["kind"] == "slow":
            time.sleep(behaviour["seconds"])
            behaviour = behaviour.get("then", {"kind": "text", "text": "late"})
        kind = behaviour["kind"]
        if kind == "raw":
            raw = behaviour["body"]
            data = (json.dumps(raw) if isinstance(raw, dict) else raw).encode()
            return behaviour.get("status", 200), [("Content-Type", behaviour.get("content_type", "application/json"))], data
        if kind == "status":
            status = behaviour["status"]
            details = None
            if "retry_delay" in behaviour:  # a 429's google.rpc.RetryInfo, as the API sends it
                details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": behaviour["retry_delay"]}]
            return self._send_json(status, error_body(status, behaviour.get("message", DEFAULT_MESSAGES.get(status, "Error")),
                                                      details))
        return self._send_json(200, reply_payload(ctx, behaviour))


# Messages of injected status errors, each a real body: 429 (the free tier's quota text, quoted
# in google-gemini/gemini-cli issues: "You exceeded your current quota, please check your plan and
# billing details."), 500 "An internal error has occurred. Please retry or report in
# https://developers.generativeai.google/guide/troubleshooting", 503 "The model is overloaded.
# Please try again later." (TROUBLESHOOTING lists both statuses).
DEFAULT_MESSAGES = {
    429: "You exceeded your current quota, please check your plan and billing details.",
    500: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
}


def _rand(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


def reply_payload(ctx: Ctx, behaviour: Behaviour) -> dict[str, Any]:
    """A GenerateContentResponse (GENERATE, "Response body"), with enums as numbers when the
    request's `$alt` asked for them."""
    as_numbers = any("enum-encoding=int" in v for v in ctx.query.get("$alt", []))

    def enum(names: tuple[str, ...], name: str) -> str | int:
        return names.index(name) if as_numbers else name

    usage = {"promptTokenCount": behaviour.get("input_tokens", 100),
             "candidatesTokenCount": behaviour.get("output_tokens", 20)}
    if behaviour.get("thoughts_tokens"):
        usage["thoughtsTokenCount"] = behaviour["thoughts_tokens"]
    usage["totalTokenCount"] = sum(usage.values())
    base = {"usageMetadata": usage, "modelVersion": ctx.model, "responseId": _rand(22)}
    kind = behaviour["kind"]
    if kind == "blocked":
        return {"promptFeedback": {"blockReason": enum(BLOCK, behaviour.get("reason", "SAFETY"))}, **base}
    parts: list[dict[str, Any]] = []
    if behaviour.get("thinking"):
        parts.append({"text": behaviour["thinking"], "thought": True})
    if behaviour.get("text"):
        parts.append({"text": behaviour["text"]})
    finish = "STOP"
    if kind == "calls":
        has_tools = any(True for _ in ctx.declarations())
        mode = ((ctx.body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
        if not has_tools or mode in ("NONE", 3):
            # the model called a function the request did not offer: no content, finishReason 12
            return {"candidates": [{"finishReason": enum(FINISH, "UNEXPECTED_TOOL_CALL"), "index": 0}], **base}
        for call in behaviour["calls"]:
            part: dict[str, Any] = {"functionCall": {"name": call["name"], "args": call.get("args", {})}}
            if call.get("signature"):
                part["thoughtSignature"] = call["signature"]
            parts.append(part)
    elif kind == "finish":
        finish = behaviour["reason"]
    elif kind != "text":
        raise ValueError(f"unknown behaviour kind {kind!r}")
    candidate: dict[str, Any] = {"finishReason": enum(FINISH, finish), "index": 0}
    if parts:
        candidate = {"content": {"parts": parts, "role": "model"}, **candidate}
    return {"candidates": [candidate], **base}


def abstract_reply(reply: dict[str, Any]) -> Behaviour:
    """A reply of the shared scenario (tests/data/official_requests/scenario.json) as Gemini gives
    it to gemini_agent.py: `text` as a text part, `answer` as a text part holding the answer's JSON
    (the script's answer channel is text), then one functionCall part per `search` query. The
    Gemini questions (gemini_questions.json) add `calls` (functionCall parts as given: name, args)
    and `finish` (a candidate that stopped for that finishReason, without content). Both the
    recorder of the official requests and deskbench's test answer with it."""
    if "finish" in reply:
        return {"kind": "finish", "reason": reply["finish"]}
    texts = [reply["text"]] if reply.get("text") else []
    if "answer" in reply:
        texts.append(json.dumps(reply["answer"], ensure_ascii=False))
    calls = [{"name": "search_documents", "args": {"query": q}} for q in reply.get("search", [])]
    calls += reply.get("calls", [])
    behaviour: Behaviour = {"kind": "calls", "calls": calls} if calls else {"kind": "text"}
    if texts:
        behaviour["text"] = "\n".join(texts)
    return behaviour
