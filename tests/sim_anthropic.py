"""A strict local simulator of Anthropic's Messages API (POST /v1/messages), for the tests.

A fake server that accepts what the real provider refuses proves nothing, so every request passes
through RULES before the test's script is asked for a reply. Each rule is one the API documents
(or is documented to answer with), and each one names its source next to it: the doc page, and the
exact error text, quoted either from the docs or from a real API response pasted into a public
issue. Where no text could be found, the comment says "text not found" and the message is the
nearest form the API uses for that kind of error; tests that depend on it should not pin it.

The state of the API modelled here (sources consulted through the docs mirror of late 2026):

* Two API versions are accepted (https://platform.claude.com/docs/en/api/versioning):
  2023-06-01 and 2026-10-21 (2023-01-01 is also listed). The anthropic SDK in this venv (2.12.0)
  sends 2026-10-21, which removes temperature/top_p/top_k ("The temperature, top_p, and top_k
  request parameters are removed"); with it those fields are answered as any unknown field is.
* The SDK sends the key as "Authorization: Bearer <key>" since 2.0.0 (migration guide
  https://platform.claude.com/docs/en/api/migration-2026-10-21); the API takes either header, and
  x-api-key wins when both are sent (measured by a third party: qiita.com/Synthorai/items/
  01a0067e88747257a4e6).

Usage:

    with SimAnthropic(script=lambda body, n: {"kind": "text", "text": "hi"}) as sim:
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)
"""

from __future__ import annotations

import io
import json
import re
import secrets
import string
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from http_double import LocalJsonServer, Response, ServedDouble, b64decode_strict

Behaviour = dict[str, Any]
"""What the script answers for an accepted request:
{"kind": "text", "text": str, "thinking"?: str, "redacted_thinking"?: str}  (a thinking block, then a
  redacted_thinking block with that data, first when given; on "tool" too)
| {"kind": "tool", "name": str, "arguments": "<JSON object as a string>", "text"?: str}
| {"kind": "blocks", "content": [{"type": "text", "text": str} | {"type": "tool_use", "name": str,
  "input": dict}, ...], "stop_reason"?: str}  (a reply of several blocks, in that order, e.g. two
  tool calls or text between them; tool_use ids are made here; stop_reason "tool_use" when any
  tool_use is given, else "end_turn", unless named)
| {"kind": "status", "status": 429 | 500 | 529 | ..., "retry_after"?: "0.05", "message"?: str}
| {"kind": "slow", "seconds": float, "then": Behaviour}
| {"kind": "raw", "body": str | dict, "status"?: int, "content_type"?: str}
Optional on text/tool: "input_tokens", "output_tokens" (the usage reported)."""

Refusal = tuple[int, dict[str, Any]]

# --- documentation pages cited below ------------------------------------------------------------
ERRORS_PAGE = "https://platform.claude.com/docs/en/api/errors"
MESSAGES_REF = "https://platform.claude.com/docs/en/api/messages"
VERSIONING = "https://platform.claude.com/docs/en/api/versioning"
MIGRATION_2026 = "https://platform.claude.com/docs/en/api/migration-2026-10-21"
MODELS = "https://platform.claude.com/docs/en/about-claude/models/overview"
VISION = "https://platform.claude.com/docs/en/build-with-claude/vision"
TOOL_USE = "https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use"
THINKING = "https://platform.claude.com/docs/en/build-with-claude/extended-thinking"
RATE_LIMITS = "https://platform.claude.com/docs/en/api/rate-limits"
STREAMING = "https://platform.claude.com/docs/en/build-with-claude/streaming"

API_VERSIONS = ("2023-01-01", "2023-06-01", "2026-10-21")  # VERSIONING, "Version history"
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # ERRORS_PAGE: "Messages API | 32 MB"
MAX_IMAGE_BASE64_CHARS = 5 * 1024 * 1024  # VISION: 5 MB per image on the API (see rule below)
MANY_IMAGES = 20  # VISION: "If you submit more than 20 images in one API request ... 2000x2000 px"


@dataclass(frozen=True)
class ModelSpec:
    """What the simulator needs to know about a model, each from its page on platform.claude.com."""

    max_output: int  # "Max output" on the model's overview page
    context: int  # "Context window"; VISION allows 100 images for 200k-context models, else 600
    no_temperature_with_top_p: bool  # refuses temperature and top_p together (rule below)
    adaptive_thinking: bool  # accepts thinking {"type": "adaptive"} (MODELS comparison table)


# Model ids and their limits. Sources: https://platform.claude.com/docs/en/models/<id>/overview
# (sonnet-4-5: "Max output: 64K tokens", context 200K; haiku-4-5: 64K, 200K; opus-4-5: 64K, 200K;
# opus-4-6: 128K, 1M; sonnet-4-6: 128K, 1M) and MODELS (Opus 4.1: 32K; the comparison table marks
# adaptive thinking "Yes" for Opus 4.6/Sonnet 4.6 and "No" for Sonnet 4.5/Haiku 4.5).
# claude-3-5-haiku-20241022 (8192 output tokens, legacy models table) is retired: the real API
# answered 404 "model: claude-3-5-haiku-20241022" in April 2026 (anthropics/claude-code#46401),
# so it is known here but not served by default. Sonnet 4 and Opus 4 were retired on 2026-06-15
# (release notes, https://platform.claude.com/docs/en/release-notes/overview) and are not listed.
_S45 = ModelSpec(64_000, 200_000, True, False)
_O41 = ModelSpec(32_000, 200_000, True, False)
_S46 = ModelSpec(128_000, 1_000_000, True, True)
MODEL_SPECS: dict[str, ModelSpec] = {
    "claude-sonnet-4-5": _S45,
    "claude-sonnet-4-5-20250929": _S45,
    "claude-haiku-4-5": _S45,
    "claude-haiku-4-5-20251001": _S45,
    "claude-opus-4-5": _S45,
    "claude-opus-4-5-20251101": _S45,
    "claude-opus-4-1": _O41,
    "claude-opus-4-1-20250805": _O41,
    "claude-opus-4-6": _S46,
    "claude-sonnet-4-6": _S46,
    "claude-3-5-haiku-20241022": ModelSpec(8_192, 200_000, False, False),
}
RETIRED = {"claude-3-5-haiku-20241022"}
DEFAULT_MODELS = frozenset(MODEL_SPECS) - RETIRED

# Allowed top-level body fields: the request schema of the Messages API reference (MESSAGES_REF;
# the same list is the SDK's MessageCreateParams, generated from the API spec). 2026-10-21 drops
# temperature, top_p and top_k (VERSIONING). Beta-only fields such as context_management are
# refused without the beta (real answer "context_management: Extra inputs are not permitted",
# Wei-Shaw/claude-relay-service#660).
_BODY_FIELDS = {"model", "messages", "max_tokens", "cache_control", "container", "diagnostics",
                "inference_geo", "metadata", "output_config", "service_tier", "speed",
                "stop_sequences", "stream", "system", "thinking", "tool_choice", "tools"}
BODY_FIELDS = {"2023-01-01": _BODY_FIELDS | {"temperature", "top_p", "top_k"},
               "2023-06-01": _BODY_FIELDS | {"temperature", "top_p", "top_k"},
               "2026-10-21": _BODY_FIELDS}

# Keys each content block may carry (MESSAGES_REF, the content block params).
BLOCK_FIELDS = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "cache_control", "citations", "context", "title"},
    "search_result": {"type", "source", "title", "content", "cache_control", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
USER_BLOCKS = {"text", "image", "document", "search_result", "tool_result"}
ASSISTANT_BLOCKS = {"text", "thinking", "redacted_thinking", "tool_use", "document"}
TOOL_FIELDS = {"name", "description", "input_schema", "cache_control", "type", "strict",
               "input_examples", "defer_loading", "allowed_callers", "eager_input_streaming"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               500: "api_error", 529: "overloaded_error"}  # ERRORS_PAGE, "HTTP errors"


def error_body(status: int, message: str, etype: str | None = None) -> dict[str, Any]:
    """ERRORS_PAGE, "Error shapes": 'Errors are always returned as JSON, with a top-level error
    object that always includes a type and message value' (the request_id is added on sending)."""
    return {"type": "error", "error": {"type": etype or ERROR_TYPES.get(status, "api_error"),
                                       "message": message}}


def bad(message: str) -> Refusal:
    return 400, error_body(400, message)


@dataclass
class Turn:
    """One conversational turn: a message, or (strict_alternation off) consecutive same-role
    messages combined, as the API does. blocks are (message index, block index, block)."""

    role: str
    first: int
    blocks: list[tuple[int, int, dict[str, Any]]]


@dataclass
class Ctx:
    body: Any
    headers: dict[str, str]
    sim: SimAnthropic

    @property
    def version(self) -> str:
        return self.headers.get("anthropic-version", "")

    @property
    def spec(self) -> ModelSpec:
        return MODEL_SPECS[self.body["model"]]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]

    def blocks(self) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        """(message index, block index, role, block) for every block, string content as text."""
        for i, m in enumerate(self.messages):
            yield from self._message_blocks(i, m)

    @staticmethod
    def _message_blocks(i: int, m: dict[str, Any]) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        content = m["content"]
        if isinstance(content, str):  # "" is empty content (message_content_nonempty), not a block
            content = [{"type": "text", "text": content}] if content else []
        for j, b in enumerate(content):
            yield i, j, m["role"], b

    def turns(self) -> list[Turn]:
        out: list[Turn] = []
        for i, m in enumerate(self.messages):
            blocks = [(i, j, b) for _i, j, _role, b in self._message_blocks(i, m)]
            if out and out[-1].role == m["role"] and not self.sim.strict_alternation:
                out[-1].blocks.extend(blocks)  # combined, as the API does (strict_alternation rule)
            else:
                out.append(Turn(m["role"], i, blocks))
        return out

    def images(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(error path, image block) for every image, including those inside tool_result content
        (VISION: all image blocks count, 'including images nested inside tool_result content')."""
        for i, j, _role, b in self.blocks():
            if b.get("type") == "image":
                yield f"messages.{i}.content.{j}.image", b
            elif b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                for k, inner in enumerate(b["content"]):
                    if isinstance(inner, dict) and inner.get("type") == "image":
                        yield f"messages.{i}.content.{j}.tool_result.content.{k}.image", inner

    def thinking_enabled(self) -> bool:
        t = self.body.get("thinking")
        return isinstance(t, dict) and t.get("type") == "enabled"


# --- the rules, in the order the simulator applies them; the first refusal answers -------------
RULES: list[tuple[str, Callable[[Ctx], Refusal | None]]] = []


def rule(fn: Callable[[Ctx], Refusal | None]) -> Callable[[Ctx], Refusal | None]:
    RULES.append((fn.__name__, fn))
    return fn


def _key(ctx: Ctx) -> str | None:
    if "x-api-key" in ctx.headers:  # x-api-key wins when both are sent (module docstring)
        return ctx.headers["x-api-key"]
    auth = ctx.headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else None


@rule
def api_key_present(ctx: Ctx) -> Refusal | None:
    # ERRORS_PAGE: 401 authentication_error. Text "x-api-key header is required", real 401 body
    # quoted in n8n-io/n8n#37930 (2026). Authorization: Bearer is accepted too (MIGRATION_2026).
    if _key(ctx) is None:
        return 401, error_body(401, "x-api-key header is required")
    return None


@rule
def api_key_valid(ctx: Ctx) -> Refusal | None:
    # Text "invalid x-api-key": real 401 body in cline/cline#12. For a wrong bearer token no
    # separate text was found; the same one is used.
    if _key(ctx) != ctx.sim.api_key:
        return 401, error_body(401, "invalid x-api-key")
    return None


@rule
def version_present(ctx: Ctx) -> Refusal | None:
    # VERSIONING: "When making API requests, you must send an anthropic-version request header."
    # Text: real body in envoyproxy/ai-gateway#1909 and PipedreamHQ/pipedream#9697.
    if "anthropic-version" not in ctx.headers:
        return bad("anthropic-version: header is required")
    return None


@rule
def version_known(ctx: Ctx) -> Refusal | None:
    # VERSIONING lists the versions. Text: real body 'anthropic-version: "2023-10-01" is not a
    # valid version' in directus-labs/extensions#285 (and decolua/9router#1227).
    if ctx.version not in API_VERSIONS:
        return bad(f'anthropic-version: "{ctx.version}" is not a valid version')
    return None


@rule
def body_is_object(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: the body is a JSON object. Text not found; this one is the simulator's.
    if not isinstance(ctx.body, dict):
        return bad("The request body is not valid JSON.")
    return None


@rule
def required_fields(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: model, messages and max_tokens are required. Text "max_tokens: Field
    # required" per the task brief; the corpus held no first-party quote of it (only a proxy's
    # 422 with the same pydantic wording, JohnnyZ93/oai-compatible-copilot#161). The form
    # "<field>: <pydantic message>" is the one the API uses (see extra_fields, sourced).
    for name in ("model", "messages", "max_tokens"):
        if name not in ctx.body:
            return bad(f"{name}: Field required")
    return None


@rule
def extra_fields(ctx: Ctx) -> Refusal | None:
    # Unknown top-level fields are refused. Text "<field>: Extra inputs are not permitted", real
    # bodies: "extra_body: ..." (Aider-AI/aider#4404), "response_format: ..." (amrit110/oli#7),
    # "context_management: ..." (Wei-Shaw/claude-relay-service#660). Under 2026-10-21 this is how
    # temperature/top_p/top_k are answered: "temperature: Extra inputs are not permitted"
    # (VERSIONING: the parameters "are removed"; the text is quoted by ttlequals0/MinusPod release
    # 2.101.10 and qiita.com/Synthorai/items/01a0067e88747257a4e6).
    extra = sorted(set(ctx.body) - BODY_FIELDS[ctx.version])
    if extra:
        return bad(f"{extra[0]}: Extra inputs are not permitted")
    return None


@rule
def model_served(ctx: Ctx) -> Refusal | None:
    # ERRORS_PAGE: 404 not_found_error. Text "model: <id>": real bodies in
    # anthropics/claude-code#5349 ("model: sonnet4") and continuedev/continue#11538.
    model = ctx.body["model"]
    if not isinstance(model, str) or model not in ctx.sim.models:
        return 404, error_body(404, f"model: {model}")
    return None


@rule
def max_tokens_integer(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: max_tokens is an integer. Text not found (pydantic form).
    mt = ctx.body["max_tokens"]
    if not isinstance(mt, int) or isinstance(mt, bool):
        return bad("max_tokens: Input should be a valid integer")
    return None


@rule
def max_tokens_not_negative(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (max_tokens): "Set to `0` to populate the prompt cache without generating a
    # response" -- so 0 is valid (the brief's ">= 1" is out of date). Negative: text not found.
    if ctx.body["max_tokens"] < 0:
        return bad("max_tokens: Input should be greater than or equal to 0")
    return None


@rule
def max_tokens_model_limit(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: "Different models have different maximum values for this parameter. See
    # models for details." Text: real bodies "max_tokens: 128001 > 64000, which is the maximum
    # allowed number of output tokens for claude-opus-4-5-20251101" (anthropics/claude-code#24451)
    # and OpenHands/OpenHands#11090.
    mt, cap = ctx.body["max_tokens"], ctx.spec.max_output
    if mt > cap:
        model = ctx.body["model"]
        return bad(f"max_tokens: {mt} > {cap}, which is the maximum allowed number of output tokens for {model}")
    return None


@rule
def system_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: system is a string or a list of text blocks. Text not found (pydantic form).
    system = ctx.body.get("system")
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return bad("system: Input should be a valid string or a list of text blocks")
    for k, b in enumerate(system):
        if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
            return bad(f"system.{k}: Input should be a text block")
        extra = sorted(set(b) - BLOCK_FIELDS["text"])
        if extra:  # "system.1.cache_control.ephemeral.scope: Extra inputs are not permitted"
            return bad(f"system.{k}.{extra[0]}: Extra inputs are not permitted")  # caozhiyuan/copilot-api#145
    return None


@rule
def messages_nonempty_list(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: messages is an array of input messages, "a limit of 100,000 messages".
    # Text for a non-list/empty list not found.
    msgs = ctx.body["messages"]
    if not isinstance(msgs, list):
        return bad("messages: Input should be a valid list")
    if not msgs:
        return bad("messages: at least one message is required")
    if len(msgs) > 100_000:
        return bad("messages: too many messages (max 100000)")
    return None


@rule
def message_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: "Each input message must be an object with a role and content."
    # Nested extra keys use the same "Extra inputs are not permitted" text with a dotted path
    # ("messages.65.content.1.tool_use.text: ...", anthropics/claude-code#4378). Other texts here
    # were not found.
    for i, m in enumerate(ctx.messages):
        if not isinstance(m, dict):
            return bad(f"messages.{i}: Input should be a valid dictionary")
        for name in ("role", "content"):
            if name not in m:
                return bad(f"messages.{i}.{name}: Field required")
        extra = sorted(set(m) - {"role", "content"})
        if extra:
            return bad(f"messages.{i}.{extra[0]}: Extra inputs are not permitted")
        if not isinstance(m["content"], str | list):
            return bad(f"messages.{i}.content: Input should be a valid string or list")
    return None


@rule
def message_role(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF lists user, assistant and (mid-conversation system messages, added 2026-05)
    # system. None of the models served here takes a system-role message: "models released
    # before Opus 4.8 reject them with role 'system' is not supported on this model"
    # (docs.rs/gproxy-transform, claude_mid_conv_system); real body "role 'system' is not
    # supported on this model" in anthropics/claude-code#61412. The older text was 'messages:
    # Unexpected role "system". The Messages API accepts a top-level `system` parameter, not
    # "system" as an input message role.' (ianarawjo/ChainForge#271). Other roles: text not found.
    for i, m in enumerate(ctx.messages):
        if m["role"] == "system":
            return bad("role 'system' is not supported on this model")
        if m["role"] not in ("user", "assistant"):
            return bad(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
    return None


# No rule that the first message must be "user": the old answer 'messages: first message must use
# the "user" role' (lobehub/lobehub#1601, 2024) no longer comes from the first-party API -- an
# assistant first message "succeeds on Anthropic but fails on Bedrock"
# (anthropics/anthropic-sdk-typescript#622), and MESSAGES_REF no longer states the rule.


@rule
def strict_alternation(ctx: Ctx) -> Refusal | None:
    # STRICTER THAN THE API, behind SimAnthropic.strict_alternation (default on). MESSAGES_REF
    # says: "Our models are trained to operate on alternating `user` and `assistant`
    # conversational turns. ... Consecutive `user` or `assistant` turns in your request will be
    # combined into a single turn." The API used to refuse them with 'messages: roles must
    # alternate between "user" and "assistant", but found multiple "user" roles in a row'
    # (etkecc/baibot#13, FlowiseAI/Flowise#3147); the simulator keeps that check so that an
    # adapter that stops merging turns is caught. With the flag off, turns are combined as the
    # API does and the tool rules below see the combined turns.
    if not ctx.sim.strict_alternation:
        return None
    for prev, cur in zip(ctx.messages, ctx.messages[1:], strict=False):
        if prev["role"] == cur["role"]:
            role = cur["role"]
            return bad(f'messages: roles must alternate between "user" and "assistant", '
                       f'but found multiple "{role}" roles in a row')
    return None


@rule
def message_content_nonempty(ctx: Ctx) -> Refusal | None:
    # Text: real body "messages.0: all messages must have non-empty content except for the
    # optional final assistant message" (anthropics/claude-code#6774, litellm#2549).
    last = len(ctx.messages) - 1
    for i, m in enumerate(ctx.messages):
        if m["content"] in ("", []) and not (i == last and m["role"] == "assistant"):
            return bad(f"messages.{i}: all messages must have non-empty content except for the "
                       "optional final assistant message")
    return None


@rule
def block_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: content blocks by type; extra keys as in message_shape (claude-code#4378).
    # Which role may carry which block: MESSAGES_REF and TOOL_USE (tool_use blocks come from the
    # assistant, tool_result blocks are returned "in a subsequent user message"). Texts for an
    # unknown type or a block in the wrong role were not found.
    for i, j, role, b in ctx.blocks():
        path = f"messages.{i}.content.{j}"
        if not isinstance(b, dict) or "type" not in b:
            return bad(f"{path}: Input should be a content block object with a type")
        btype = b["type"]
        if btype not in BLOCK_FIELDS:
            return bad(f"{path}: Input tag '{btype}' found using 'type' does not match any of the expected tags")
        extra = sorted(set(b) - BLOCK_FIELDS[btype])
        if extra:
            return bad(f"{path}.{btype}.{extra[0]}: Extra inputs are not permitted")
        allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
        if btype not in allowed:
            return bad(f"{path}: `{btype}` blocks are not allowed in `{role}` messages")
        if btype == "tool_use":
            for name, kind in (("id", str), ("name", str), ("input", dict)):
                if name not in b:
                    return bad(f"{path}.tool_use.{name}: Field required")
                if not isinstance(b[name], kind):
                    return bad(f"{path}.tool_use.{name}: Input should be a valid {kind.__name__}")
        if btype == "tool_result" and not isinstance(b.get("tool_use_id"), str):
            return bad(f"{path}.tool_result.tool_use_id: Field required")
        if btype == "text" and not isinstance(b.get("text"), str):
            return bad(f"{path}.text.text: Field required")
    return None


@rule
def text_nonempty(ctx: Ctx) -> Refusal | None:
    # Texts: real bodies "messages: text content blocks must be non-empty"
    # (anthropics/claude-code#59812, 2026) and "messages: text content blocks must contain
    # non-whitespace text" (anthropics/claude-code#23369, 2026). String content is a text block
    # (MESSAGES_REF: "Using a string for content is shorthand for an array of one content block
    # of type text"); an empty string is answered by message_content_nonempty first.
    for _i, _j, _role, b in ctx.blocks():
        if b["type"] == "text":
            if b["text"] == "":
                return bad("messages: text content blocks must be non-empty")
            if not b["text"].strip():
                return bad("messages: text content blocks must contain non-whitespace text")
    return None


def _tool_use_ids(turn: Turn) -> list[str]:
    return [b["id"] for _i, _j, b in turn.blocks if b["type"] == "tool_use"]


@rule
def tool_use_answered(ctx: Ctx) -> Refusal | None:
    # TOOL_USE: "Tool result blocks must immediately follow their corresponding tool use blocks in
    # the message history." Text: real body "messages.22: `tool_use` ids were found without
    # `tool_result` blocks immediately after: toolu_01Hq..., toolu_01SJ.... Each `tool_use` block
    # must have a corresponding `tool_result` block in the next message."
    # (anthropics/claude-code#5989, #1237; Kilo-Org/kilocode#5163). Which message index the API
    # names was not determinable; here it is the assistant message holding the tool_use.
    turns = ctx.turns()
    for t, turn in enumerate(turns):
        ids = _tool_use_ids(turn) if turn.role == "assistant" else []
        if not ids:
            continue
        nxt = turns[t + 1] if t + 1 < len(turns) else None
        answered = {b["tool_use_id"] for _i, _j, b in nxt.blocks if b["type"] == "tool_result"} if nxt else set()
        missing = [x for x in ids if x not in answered]
        if missing:
            first = next(i for i, _j, b in turn.blocks if b["type"] == "tool_use" and b["id"] in missing)
            return bad(f"messages.{first}: `tool_use` ids were found without `tool_result` blocks "
                       f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                       "corresponding `tool_result` block in the next message.")
    return None


@rule
def tool_results_first(ctx: Ctx) -> Refusal | None:
    # TOOL_USE: "In the user message containing tool results, the tool_result blocks must come
    # FIRST in the content array. Any text must come AFTER all tool results." Text: real body
    # "messages.27: Did not find 1 tool_result block(s) at the beginning of this message. Messages
    # following tool_use blocks must begin with a matching number of tool_result blocks."
    # (apify/tester-mcp-client#12).
    turns = ctx.turns()
    for t, turn in enumerate(turns[:-1]):
        ids = _tool_use_ids(turn) if turn.role == "assistant" else []
        if not ids:
            continue
        nxt = turns[t + 1]
        lead = 0
        for _i, _j, b in nxt.blocks:
            if b["type"] != "tool_result":
                break
            lead += 1
        if lead < len(ids):
            return bad(f"messages.{nxt.first}: Did not find {len(ids)} tool_result block(s) at the "
                       "beginning of this message. Messages following tool_use blocks must begin "
                       "with a matching number of tool_result blocks.")
    return None


@rule
def tool_result_has_tool_use(ctx: Ctx) -> Refusal | None:
    # TOOL_USE (as above). Text: real body "messages.48.content.1: unexpected `tool_use_id` found
    # in `tool_result` blocks: toolu_019E.... Each `tool_result` block must have a corresponding
    # `tool_use` block in the previous message." (anthropics/claude-code#13460,
    # router-for-me/CLIProxyAPI#497).
    turns = ctx.turns()
    for t, turn in enumerate(turns):
        previous = set(_tool_use_ids(turns[t - 1])) if t > 0 and turns[t - 1].role == "assistant" else set()
        for i, j, b in turn.blocks:
            if b["type"] == "tool_result" and b["tool_use_id"] not in previous:
                return bad(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                           f"blocks: {b['tool_use_id']}. Each `tool_result` block must have a "
                           "corresponding `tool_use` block in the previous message.")
    return None


@rule
def image_count(ctx: Ctx) -> Refusal | None:
    # VISION, "General limits": "100 per request on the API, for models with a 200k-token context
    # window. 600 per request on the API, for all other models." Text: real body "Too much media:
    # 0 document pages + 102 images > 100" (anthropics/claude-code#19822, 2026; an older text was
    # "too many images and documents: 120 + 0 > 100", #24541).
    n = sum(1 for _ in ctx.images())
    limit = 100 if ctx.spec.context <= 200_000 else 600
    if n > limit:
        return bad(f"Too much media: 0 document pages + {n} images > {limit}")
    return None


_MAGIC = (("image/png", b"\x89PNG\r\n\x1a\n"), ("image/jpeg", b"\xff\xd8\xff"),
          ("image/gif", b"GIF87a"), ("image/gif", b"GIF89a"))


def _sniff(data: bytes) -> str | None:
    for mime, magic in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@rule
def image_source(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: an image source is {"type": "base64", "media_type", "data"} or {"type": "url",
    # "url"} (file sources need the Files API beta, not simulated). Media types: real body
    # "messages.36.content.2.image.source.base64.media_type: Input should be 'image/jpeg',
    # 'image/png', 'image/gif' or 'image/webp'" (anthropics/claude-code#8184).
    for path, img in ctx.images():
        src = img.get("source")
        if not isinstance(src, dict) or src.get("type") not in ("base64", "url"):
            return bad(f"{path}.source: Input tag does not match any of the expected tags: 'base64', 'url'")
        if src["type"] == "url":
            if not isinstance(src.get("url"), str):
                return bad(f"{path}.source.url.url: Field required")
            continue
        if src.get("media_type") not in ("image/jpeg", "image/png", "image/gif", "image/webp"):
            return bad(f"{path}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
                       "'image/gif' or 'image/webp'")
        if not isinstance(src.get("data"), str):
            return bad(f"{path}.source.base64.data: Field required")
    return None


@rule
def image_size(ctx: Ctx) -> Refusal | None:
    # VISION: 5 MB per image on the API. Measured on the base64 STRING, not the decoded bytes:
    # real body "messages.1.content.2.image.source.base64: image exceeds 5 MB maximum: 6275800
    # bytes > 5242880 bytes" for a 4.7 MB file (lobehub/lobehub#14711: "enforced on the
    # base64-encoded payload"); Claude Code's limits file says "The API rejects images where the
    # base64 string length exceeds this value" (constants/apiLimits.ts). Same text:
    # anthropics/claude-code#19631, #13381.
    for path, img in ctx.images():
        src = img["source"]
        if src["type"] == "base64" and len(src["data"]) > MAX_IMAGE_BASE64_CHARS:
            return bad(f"{path}.source.base64: image exceeds 5 MB maximum: {len(src['data'])} bytes "
                       f"> {MAX_IMAGE_BASE64_CHARS} bytes")
    return None


@rule
def image_media_type_matches(ctx: Ctx) -> Refusal | None:
    # The declared media type must match the bytes. Text: real body "messages.51.content.6.image.
    # source.base64: The image was specified using the image/jpeg media type, but the image
    # appears to be a image/png image" (dust-tt/dust#26545, BerriAI/litellm#24900, 2026; the 2025
    # text was "...base64.data: Image does not match the provided media type image/png",
    # anthropics/claude-code#15746). Undecodable or unrecognised data: text not found.
    for path, img in ctx.images():
        src = img["source"]
        if src["type"] != "base64":
            continue
        raw = b64decode_strict(src["data"])
        actual = _sniff(raw) if raw is not None else None
        if actual is None:
            return bad(f"{path}.source.base64.data: Could not process image")
        if actual != src["media_type"]:
            return bad(f"{path}.source.base64: The image was specified using the {src['media_type']} "
                       f"media type, but the image appears to be a {actual} image")
    return None


@rule
def image_dimensions(ctx: Ctx) -> Refusal | None:
    # VISION: "The maximal dimensions per image are 8000x8000 px. If you submit more than 20
    # images in one API request, this limit is reduced to 2000x2000 px." Texts: real bodies
    # "messages.7.content.2.image.source.base64.data: At least one of the image dimensions exceed
    # max allowed size: 8000 pixels" (anthropics/claude-code#4778) and "...: At least one of the
    # image dimensions exceed max allowed size for many-image requests: 2000 pixels"
    # (anthropics/claude-code#49537, #14412). Dimensions read with Pillow from the decoded bytes.
    from PIL import Image

    images = list(ctx.images())
    many = len(images) > MANY_IMAGES
    side = 2000 if many else 8000
    for path, img in images:
        src = img["source"]
        if src["type"] != "base64":
            continue
        raw = b64decode_strict(src["data"])
        assert raw is not None  # image_media_type_matches ran first
        try:
            with Image.open(io.BytesIO(raw)) as im:
                width, height = im.size
        except Exception:  # noqa: BLE001 -- any Pillow failure is an unprocessable image
            return bad(f"{path}.source.base64.data: Could not process image")
        if max(width, height) > side:
            suffix = " for many-image requests" if many else ""
            return bad(f"{path}.source.base64.data: At least one of the image dimensions exceed max "
                       f"allowed size{suffix}: {side} pixels")
    return None


@rule
def version_2026_content(ctx: Ctx) -> Refusal | None:
    # VERSIONING, 2026-10-21: "A request that places a document block directly in an assistant
    # message returns a 400 error. Sending a text block with a non-empty citations array in a user
    # message ... returns a 400 error." Texts not found.
    if ctx.version != "2026-10-21":
        return None
    for i, j, role, b in ctx.blocks():
        if role == "assistant" and b["type"] == "document":
            return bad(f"messages.{i}.content.{j}: document blocks are not allowed in assistant messages")
        if role == "user" and b["type"] == "text" and b.get("citations"):
            return bad(f"messages.{i}.content.{j}.text.citations: citations are not allowed in user messages")
    return None


_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


@rule
def tools_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (tools): name, description, input_schema. Custom tools only; server tools
    # ("type": "web_search_20250305", ...) are passed through unvalidated.
    # Name: real bodies "tools.0.custom.name: String should match pattern
    # '^[a-zA-Z0-9_-]{1,128}$'" (home-assistant/core#147760; netclaw-dev/netclaw#1133, 2026; it was
    # {1,64} in early 2025) and "tools.18.custom.name: String should have at most 128 characters"
    # (anthropics/claude-code#96152, 2026-09). input_schema: the SDK types it {"type": "object",
    # ...} ("type: Required[Literal['object']]"); real body "tools.1.custom.input_schema:
    # input_schema does not support oneOf, allOf, or anyOf at the top level"
    # (Hmbown/Codewhale#4329). Missing fields / non-object type: text not found (pydantic form).
    tools = ctx.body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return bad("tools: Input should be a valid list")
    for k, tool in enumerate(tools):
        path = f"tools.{k}.custom"
        if not isinstance(tool, dict):
            return bad(f"tools.{k}: Input should be a valid dictionary")
        if tool.get("type") not in (None, "custom"):
            continue
        extra = sorted(set(tool) - TOOL_FIELDS)
        if extra:
            return bad(f"{path}.{extra[0]}: Extra inputs are not permitted")
        for name in ("name", "input_schema"):
            if name not in tool:
                return bad(f"{path}.{name}: Field required")
        name = tool["name"]
        if not isinstance(name, str):
            return bad(f"{path}.name: Input should be a valid string")
        if len(name) > 128:
            return bad(f"{path}.name: String should have at most 128 characters")
        if not _TOOL_NAME.match(name):
            return bad(f"{path}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        schema = tool["input_schema"]
        if not isinstance(schema, dict):
            return bad(f"{path}.input_schema: Input should be a valid dictionary")
        if schema.get("type") != "object":
            return bad(f"{path}.input_schema.type: Input should be 'object'")
        if {"oneOf", "allOf", "anyOf"} & set(schema):
            return bad(f"{path}.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level")
    return None


@rule
def tool_names_unique(ctx: Ctx) -> Refusal | None:
    # Text: real body "tools: Tool names must be unique." (danny-avila/LibreChat#13162, 2026).
    names = [t.get("name") for t in ctx.body.get("tools") or [] if isinstance(t, dict)]
    if len(names) != len(set(names)):
        return bad("tools: Tool names must be unique.")
    return None


@rule
def tool_choice_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (tool_choice): {"type": "auto"|"any"|"none"} or {"type": "tool", "name"};
    # auto/any/tool take disable_parallel_tool_use. Tool choice "none" since 2025-02-27 (release
    # notes, cited in UKGovernmentBEIS/inspect_ai#1617). Texts not found (pydantic form).
    choice = ctx.body.get("tool_choice")
    if choice is None:
        return None
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        return bad("tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'")
    allowed = {"type"} if choice["type"] == "none" else {"type", "disable_parallel_tool_use"}
    if choice["type"] == "tool":
        allowed |= {"name"}
        if not isinstance(choice.get("name"), str):
            return bad("tool_choice.tool.name: Field required")
    extra = sorted(set(choice) - allowed)
    if extra:
        return bad(f"tool_choice.{choice['type']}.{extra[0]}: Extra inputs are not permitted")
    return None


@rule
def tool_choice_needs_tools(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: tool_choice says "How the model should use the provided tools", so it needs
    # tools. Text not found in the corpus; this is the wording recalled from the API.
    if "tool_choice" in ctx.body and not ctx.body.get("tools"):
        return bad("tool_choice may only be specified while providing tools.")
    return None


@rule
def tool_choice_names_a_tool(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF: {"type": "tool", "name"} forces "the specified tool"; it must be one of tools.
    # Text not found.
    choice = ctx.body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        names = {t.get("name") for t in ctx.body["tools"] if isinstance(t, dict)}
        if choice["name"] not in names:
            return bad(f"tool_choice.tool.name: Tool '{choice['name']}' not found in tools")
    return None


@rule
def sampling_ranges(ctx: Ctx) -> Refusal | None:
    # API version 2023-06-01 only (2026-10-21 answers these fields in extra_fields).
    # MESSAGES_REF (temperature): "Defaults to 1.0. Ranges from 0.0 to 1.0." -1 used to slip
    # through ("temperature: range: -1 or 0..1", anthropics/anthropic-sdk-python#893, 2025) and is
    # refused since (maintainer, same issue, 2026-08: "temperature=-1 is now rejected with a 400").
    # Current text not found; this keeps the old form. top_p: nucleus probability, 0..1 (text not
    # found). top_k: an integer (text not found).
    for name in ("temperature", "top_p"):
        value = ctx.body.get(name)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
            return bad(f"{name}: range: 0..1")
    top_k = ctx.body.get("top_k")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0):
        return bad("top_k: Input should be a valid non-negative integer")
    return None


@rule
def temperature_with_top_p(ctx: Ctx) -> Refusal | None:
    # Claude 4.x models from Opus 4.1 on refuse both: "Use only temperature OR top_p, not both.
    # Setting both returns a 400 error on Claude Haiku 4.5"
    # (https://platform.claude.com/docs/en/models/haiku-4-5/migration-guide; the same breaking
    # change for Sonnet 4.5 / Opus 4.1 in
    # https://platform.claude.com/docs/en/about-claude/models/migrating-to-claude-4). Text: real
    # body "`temperature` and `top_p` cannot both be specified for this model. Please use only
    # one." (infiniflow/ragflow#11815, seacloud9/XRAiAssistant ANTHROPIC_TOP_P_FIX.md).
    if ctx.spec.no_temperature_with_top_p and "temperature" in ctx.body and "top_p" in ctx.body:
        return bad("`temperature` and `top_p` cannot both be specified for this model. Please use only one.")
    return None


@rule
def thinking_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (thinking): {"type": "enabled", "budget_tokens", "display"?} | {"type":
    # "disabled"} | {"type": "adaptive", "display"?}; adaptive only on the models the MODELS table
    # marks "Adaptive thinking: Yes". Texts not found.
    t = ctx.body.get("thinking")
    if t is None:
        return None
    if not isinstance(t, dict) or t.get("type") not in ("enabled", "disabled", "adaptive"):
        return bad("thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'")
    allowed = {"enabled": {"type", "budget_tokens", "display"}, "disabled": {"type"},
               "adaptive": {"type", "display"}}[t["type"]]
    extra = sorted(set(t) - allowed)
    if extra:
        return bad(f"thinking.{t['type']}.{extra[0]}: Extra inputs are not permitted")
    if t["type"] == "enabled" and (not isinstance(t.get("budget_tokens"), int) or isinstance(t["budget_tokens"], bool)):
        return bad("thinking.enabled.budget_tokens: Field required")
    if t["type"] == "adaptive" and not ctx.spec.adaptive_thinking:
        return bad(f"thinking.adaptive: adaptive thinking is not supported on {ctx.body['model']}")
    return None


@rule
def thinking_budget_minimum(ctx: Ctx) -> Refusal | None:
    # THINKING / MESSAGES_REF (budget_tokens): "Must be ≥1024 and less than max_tokens." Text: real
    # body "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    # (themaximalist/llm.js#30, 2026).
    if ctx.thinking_enabled() and ctx.body["thinking"]["budget_tokens"] < 1024:
        return bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    return None


@rule
def thinking_budget_below_max_tokens(ctx: Ctx) -> Refusal | None:
    # As above ("less than max_tokens"); THINKING notes the exception for interleaved thinking
    # (beta header interleaved-thinking-2025-05-14), where the budget may exceed max_tokens.
    # Text: real body "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult
    # our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-
    # tokens-and-context-window-size" (liuw1535/antigravity2api-nodejs#150, 2026).
    if "interleaved-thinking" in ctx.headers.get("anthropic-beta", ""):
        return None
    if ctx.thinking_enabled() and ctx.body["max_tokens"] <= ctx.body["thinking"]["budget_tokens"]:
        return bad("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                   "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                   "#max-tokens-and-context-window-size")
    return None


@rule
def thinking_temperature(ctx: Ctx) -> Refusal | None:
    # THINKING, "Feature compatibility": "Thinking isn't compatible with temperature or top_k
    # modifications". Text: real body "`temperature` may only be set to 1 when thinking is
    # enabled. Please consult our documentation at
    # https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    # (X10NLUN1X/Xionimus, Documents/ANTHROPIC_TEMPERATURE_FIX.md).
    if ctx.thinking_enabled() and ctx.body.get("temperature", 1) != 1:
        return bad("`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                   "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
    return None


@rule
def thinking_top_p(ctx: Ctx) -> Refusal | None:
    # THINKING, "Feature compatibility": "you can set top_p to values between 1 and 0.95".
    # Text not found (Bedrock's "top_p must be unset when thinking is enabled" is another
    # service's); this wording follows the top_k message below.
    top_p = ctx.body.get("top_p")
    if ctx.thinking_enabled() and top_p is not None and not 0.95 <= top_p <= 1:
        return bad("`top_p` must be between 0.95 and 1 when thinking is enabled. Please consult our "
                   "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                   "#important-considerations-when-using-extended-thinking")
    return None


@rule
def thinking_top_k(ctx: Ctx) -> Refusal | None:
    # THINKING (as above). Text: real body "`top_k` must be unset when thinking is enabled. Please
    # consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-
    # thinking#important-considerations-when-using-extended-thinking"
    # (quarkiverse/quarkus-langchain4j#1812, danny-avila/LibreChat#6023).
    if ctx.thinking_enabled() and "top_k" in ctx.body:
        return bad("`top_k` must be unset when thinking is enabled. Please consult our documentation at "
                   "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                   "#important-considerations-when-using-extended-thinking")
    return None


@rule
def thinking_tool_choice(ctx: Ctx) -> Refusal | None:
    # THINKING, "Feature compatibility": "Thinking isn't compatible with ... forced tool use"
    # (tool_choice any or tool; auto and none are fine). Text: real body "Thinking may not be
    # enabled when tool_choice forces tool use." (mastra-ai/mastra#7507, can1357/oh-my-pi#341).
    choice = ctx.body.get("tool_choice")
    if ctx.thinking_enabled() and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return bad("Thinking may not be enabled when tool_choice forces tool use.")
    return None


def _assistant_turns(ctx: Ctx) -> list[Turn]:
    return [t for t in ctx.turns() if t.role == "assistant"]


@rule
def thinking_blocks_unmodified(ctx: Ctx) -> Refusal | None:
    # THINKING, "Preserving thinking blocks": thinking and redacted_thinking blocks go back "complete
    # and unmodified"; the signature is checked (a changed text or signature is refused). Text: real
    # body "messages.1.content.0: Invalid `signature` in `thinking` block" (BerriAI/litellm issues,
    # e.g. #10136); for redacted data no text was found, the same form is used. A block this server
    # never returned counts as modified.
    for turn in _assistant_turns(ctx):
        for i, j, b in turn.blocks:
            if b.get("type") == "thinking" and ctx.sim.issued_thinking.get(str(b.get("signature"))) != b.get("thinking"):
                return bad(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
            if b.get("type") == "redacted_thinking" and b.get("data") not in ctx.sim.issued_redacted:
                return bad(f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block")
    return None


@rule
def thinking_not_the_last_block(ctx: Ctx) -> Refusal | None:
    # An assistant message may not end in a thinking block. Text: real body "messages.1: The final
    # block in an assistant message cannot be `thinking`." (tailcallhq/forgecode#2107).
    for turn in _assistant_turns(ctx):
        if turn.blocks and turn.blocks[-1][2].get("type") in ("thinking", "redacted_thinking"):
            return bad(f"messages.{turn.blocks[-1][0]}: The final block in an assistant message cannot be `thinking`.")
    return None


@rule
def thinking_disabled_final_assistant(ctx: Ctx) -> Refusal | None:
    # Thinking blocks of earlier assistant turns are ignored when thinking is off, but not in a final
    # (prefilled) assistant message. Text: real body "messages.1.content.0: When thinking is disabled,
    # an `assistant` message in the final position cannot contain `thinking`. To use thinking blocks,
    # enable `thinking` in your request." (tailcallhq/forgecode#1853).
    turns = ctx.turns()
    if ctx.thinking_enabled() or not turns or turns[-1].role != "assistant":
        return None
    for i, j, b in turns[-1].blocks:
        if b.get("type") in ("thinking", "redacted_thinking"):
            return bad(f"messages.{i}.content.{j}: When thinking is disabled, an `assistant` message in the final "
                       "position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.")
    return None


@rule
def thinking_tool_loop_keeps_thinking(ctx: Ctx) -> Refusal | None:
    # THINKING, "Thinking with tool use": with thinking on, the assistant turn whose tool_use the last
    # user turn answers must come back starting with its thinking block. Text: real body
    # "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When
    # `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding
    # the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking
    # blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our
    # documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    # (n8n-io/n8n#22550, quoted there without the backticks).
    turns = ctx.turns()
    if not ctx.thinking_enabled() or len(turns) < 2 or turns[-1].role != "user" or turns[-2].role != "assistant":
        return None
    if not any(b.get("type") == "tool_result" for _i, _j, b in turns[-1].blocks) or not turns[-2].blocks:
        return None
    i, j, first = turns[-2].blocks[0]
    if first.get("type") not in ("thinking", "redacted_thinking"):
        return bad(f"messages.{i}.content.{j}.type: Expected `thinking` or `redacted_thinking`, but found "
                   f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start "
                   "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
                   "We recommend you include thinking blocks from previous turns. To avoid this requirement, "
                   "disable `thinking`. Please consult our documentation at "
                   "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
    return None


@rule
def stop_sequences_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (stop_sequences): "Custom text sequences" -- a list of strings. Text not found.
    seqs = ctx.body.get("stop_sequences")
    if seqs is not None and (not isinstance(seqs, list) or not all(isinstance(s, str) for s in seqs)):
        return bad("stop_sequences: Input should be a valid list of strings")
    return None


@rule
def metadata_shape(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (metadata): an object whose only field is user_id (string or null). Extra keys:
    # the "Extra inputs are not permitted" text (see extra_fields); wrong type: text not found.
    meta = ctx.body.get("metadata")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return bad("metadata: Input should be a valid dictionary")
    extra = sorted(set(meta) - {"user_id"})
    if extra:
        return bad(f"metadata.{extra[0]}: Extra inputs are not permitted")
    if meta.get("user_id") is not None and not isinstance(meta["user_id"], str):
        return bad("metadata.user_id: Input should be a valid string")
    return None


@rule
def stream_flag(ctx: Ctx) -> Refusal | None:
    # MESSAGES_REF (stream): a boolean. Text not found.
    if "stream" in ctx.body and not isinstance(ctx.body["stream"], bool):
        return bad("stream: Input should be a valid boolean")
    return None


# --- the server --------------------------------------------------------------------------------
_ALNUM = string.ascii_letters + string.digits


def _rand_id(prefix: str, n: int = 24) -> str:
    return prefix + "".join(secrets.choice(_ALNUM) for _ in range(n))


def _text_default(body: dict[str, Any], n: int) -> Behaviour:
    return {"kind": "text", "text": "ok"}


@dataclass
class SimAnthropic(ServedDouble):
    """Context manager: `with SimAnthropic() as sim:`; point the SDK at sim.base_url."""

    script: Callable[[dict[str, Any], int], Behaviour] = _text_default
    api_key: str = "sk-ant-test"
    models: set[str] | None = None
    strict_alternation: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    script_errors: list[str] = field(default_factory=list)
    # every thinking block (signature -> its text) and redacted_thinking data this server returned:
    # a block sent back must be one of them, unchanged (rule thinking_blocks_unmodified)
    issued_thinking: dict[str, str] = field(default_factory=dict)
    issued_redacted: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _server: LocalJsonServer | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.models = set(DEFAULT_MODELS if self.models is None else self.models)
        unknown = self.models - set(MODEL_SPECS)
        if unknown:
            raise ValueError(f"no ModelSpec for {sorted(unknown)}: add it to MODEL_SPECS with its documented limits")

    @property
    def base_url(self) -> str:
        return self._url

    def check(self, body: Any, headers: dict[str, str]) -> tuple[str, Refusal] | None:
        """The first rule that refuses the request, as (rule name, (status, body)), or None."""
        ctx = Ctx(body, {k.lower(): v for k, v in headers.items()}, self)
        for name, fn in RULES:
            refusal = fn(ctx)
            if refusal is not None:
                return name, refusal
        return None

    # --- request handling ------------------------------------------------------------------
    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(body if isinstance(body, dict) else {"_raw": raw[:2000].decode("utf-8", "replace")})
            self.headers.append(headers)
        if path.split("?", 1)[0] != "/v1/messages":
            # Text "Not Found" as relayed in openclaw/openclaw#10552 ("not_found_error: Not Found").
            return self._send_json(404, error_body(404, "Not Found"))
        if len(raw) > MAX_REQUEST_BYTES:
            # ERRORS_PAGE: 413 request_too_large, "The maximum request size is 32 MB for standard API
            # endpoints", "returned from Cloudflare before the request reaches our API servers".
            # Body as relayed in earendil-works/pi#401: {"error":{"type":"request_too_large",
            # "message":"Request exceeds the maximum size"}} (no top-level "type").
            return self._refuse(body, "request_size",
                                (413, {"error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}}))
        verdict = self.check(body, headers)
        if verdict is not None:
            return self._refuse(body, *verdict)
        with self._lock:
            self.accepted.append(body)
            n = len(self.accepted)
        try:
            if body["max_tokens"] == 0:  # prompt-cache pre-warming: nothing is generated
                behaviour: Behaviour = {"kind": "text", "text": "", "_empty": True}
            else:
                behaviour = self.script(body, n)
            return self._answer(body, behaviour)
        except Exception as exc:  # noqa: BLE001 -- a broken script is a test bug; say so loudly
            with self._lock:
                self.script_errors.append(f"{type(exc).__name__}: {exc}")
            return self._send_json(500, error_body(500, f"simulator script error: {type(exc).__name__}: {exc}"))

    def _refuse(self, body: Any, rule_name: str, refusal: Refusal) -> Response:
        status, payload = refusal
        with self._lock:
            self.refused.append({"status": status, "body": payload, "request": body, "rule": rule_name})
        return self._send_json(status, payload)

    @staticmethod
    def _send_json(status: int, payload: dict[str, Any], extra_headers: dict[str, str] | None = None) -> Response:
        request_id = _rand_id("req_011C")
        if payload.get("type") == "error":  # ERRORS_PAGE: "also includes a request_id field"
            payload = {**payload, "request_id": request_id}
        headers = [("content-type", "application/json"), ("request-id", request_id)]  # ERRORS_PAGE, "Request id"
        return status, [*headers, *(extra_headers or {}).items()], json.dumps(payload).encode()

    def _answer(self, body: dict[str, Any], behaviour: Behaviour) -> Response:
        while behaviour["kind"] == "slow":
            time.sleep(behaviour["seconds"])
            behaviour = behaviour.get("then", {"kind": "text", "text": "late"})
        kind = behaviour["kind"]
        if kind == "raw":
            raw = behaviour["body"]
            data = (json.dumps(raw) if isinstance(raw, dict) else raw).encode()
            return behaviour.get("status", 200), [("content-type", behaviour.get("content_type", "application/json"))], data
        if kind == "status":
            status = behaviour["status"]
            extra: dict[str, str] = {}
            if "retry_after" in behaviour:
                extra["retry-after"] = str(behaviour["retry_after"])
            elif status == 429:
                # RATE_LIMITS: a 429 comes "along with a retry-after header indicating how long to
                # wait" (page text recalled; third-party guides quote "retry-after: 60 // Seconds").
                extra["retry-after"] = "1"
            return self._send_json(status, error_body(status, behaviour.get("message", DEFAULT_MESSAGES.get(status, "Error"))), extra)
        message = message_payload(body, behaviour)
        with self._lock:
            for block in message["content"]:
                if block["type"] == "thinking":
                    self.issued_thinking[block["signature"]] = block["thinking"]
                elif block["type"] == "redacted_thinking":
                    self.issued_redacted.add(block["data"])
        if body.get("stream"):
            return 200, [("content-type", "text/event-stream"), ("request-id", _rand_id("req_011C"))], sse_payload(message).encode()
        return self._send_json(200, message)


# Messages of the injected status errors, each a real body: 429 (cline/cline#252), 500
# "Internal server error" (anthropics/claude-code#61368), 529 "Overloaded"
# (anthropics/claude-code#3633, #35792).
DEFAULT_MESSAGES = {
    429: "Number of request tokens has exceeded your per-minute rate limit "
         "(https://docs.anthropic.com/en/api/rate-limits); see the response headers for current usage. "
         "Please reduce the prompt length or the maximum tokens requested, or try again later. You may "
         "also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a "
         "rate limit increase.",
    500: "Internal server error",
    529: "Overloaded",
}


def message_payload(body: dict[str, Any], behaviour: Behaviour) -> dict[str, Any]:
    """A Message object (MESSAGES_REF, response): id, type, role, model, content, stop_reason,
    stop_sequence, usage."""
    content: list[dict[str, Any]] = []
    if behaviour.get("thinking"):
        content.append({"type": "thinking", "thinking": behaviour["thinking"], "signature": _rand_id("sig", 40)})
    if behaviour.get("redacted_thinking"):
        content.append({"type": "redacted_thinking", "data": behaviour["redacted_thinking"]})
    if behaviour["kind"] == "tool":
        args = json.loads(behaviour["arguments"])
        if not isinstance(args, dict):
            raise ValueError("tool arguments must be a JSON object")
        if behaviour.get("text"):
            content.append({"type": "text", "text": behaviour["text"]})
        content.append({"type": "tool_use", "id": _rand_id("toolu_01"), "name": behaviour["name"], "input": args})
        stop = "tool_use"
    elif behaviour["kind"] == "blocks":
        for block in behaviour["content"]:
            if block["type"] == "tool_use":
                if not isinstance(block["input"], dict):
                    raise ValueError("tool_use input must be a JSON object")
                content.append({"type": "tool_use", "id": _rand_id("toolu_01"), "name": block["name"],
                                "input": block["input"]})
            elif block["type"] == "text":
                content.append({"type": "text", "text": block["text"]})
            else:
                raise ValueError(f"unknown block type {block['type']!r}")
        default = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        stop = behaviour.get("stop_reason", default)
    elif behaviour["kind"] == "text":
        if not behaviour.get("_empty"):
            content.append({"type": "text", "text": behaviour["text"]})
        stop = "max_tokens" if behaviour.get("_empty") else "end_turn"
    else:
        raise ValueError(f"unknown behaviour kind {behaviour['kind']!r}")
    out_tokens = 0 if behaviour.get("_empty") else behaviour.get("output_tokens", 20)
    return {
        "id": _rand_id("msg_01"), "type": "message", "role": "assistant", "model": body["model"],
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": behaviour.get("input_tokens", 100), "output_tokens": out_tokens,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "service_tier": "standard"},
    }


def sse_payload(message: dict[str, Any]) -> str:
    """The message as server-sent events, in the order STREAMING documents: message_start, per
    block content_block_start / content_block_delta / content_block_stop, message_delta,
    message_stop."""

    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n"

    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    out = [event("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            first, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        elif block["type"] == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(event("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}))
        out.append(event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        if block["type"] == "thinking":
            out.append(event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                     "delta": {"type": "signature_delta", "signature": block["signature"]}}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                       "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return "".join(out)
