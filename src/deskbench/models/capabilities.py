"""What each model accepts, in one table: the adapters build every request from it.

Providers differ in what a request may carry (OpenAI's reasoning models refuse `max_tokens` and
any temperature but 1; Anthropic requires `max_tokens`; llama.cpp's servers refuse a null
assistant content), and getting one wrong fails every call of a run. So nothing model-specific
lives in agents or judges: they say what they want (a temperature, a forced tool, a schema), the
adapter looks the model up here and sends what the model takes, and the user's settings are
checked against the same entry before the run starts.

The table is a list of rules, each a provider and a glob over model names with the fields it
sets; every matching rule applies in order, so later rules refine earlier ones. The built-in
rules are in `capabilities.toml` beside this module; a user file (`--capabilities FILE` or
DESKBENCH_CAPABILITIES, TOML or JSON of the same shape) is applied after them and so wins.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deskbench.errors import UserError

BUILTIN_FILE = Path(__file__).with_name("capabilities.toml")
ENV_FILE = "DESKBENCH_CAPABILITIES"

ToolChoiceForm = Literal["auto", "none", "required", "named"]
TOOL_CHOICE_FORMS: tuple[ToolChoiceForm, ...] = ("auto", "none", "required", "named")


class Capabilities(BaseModel):
    """One model's rules, as the adapters and the settings check read them."""

    model_config = ConfigDict(extra="forbid")

    reasoning: bool = False  # a reasoning model: no sampling knobs, an effort instead
    output_limit: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"  # the field's name
    max_tokens_required: bool = False  # the request is refused without an output limit
    default_max_tokens: int | None = None  # sent when the user gives none and one is required
    max_output_tokens: int | None = None  # the largest output limit the model accepts
    temperature: bool = True  # may be set
    temperature_max: float = 2.0
    top_p: bool = True
    temperature_with_top_p: bool = True  # both in one request
    top_k: bool = False  # top-k sampling may be set (not an OpenAI field: only where a provider documents it)
    reasoning_effort: list[str] = Field(default_factory=list[str])  # accepted values; empty = not accepted
    seed: bool = True
    vision: bool = True
    structured: Literal["json_schema", "json_object", "tool", "none"] = "json_schema"
    tool_choice: list[ToolChoiceForm] = Field(default_factory=lambda: list(TOOL_CHOICE_FORMS))
    max_images: int | None = None  # per request
    max_image_bytes: int | None = None  # per image, as sent (decoded bytes)
    max_image_side: int | None = None  # pixels, the longer side
    max_image_side_many: int | None = None  # the longer side when a request has more than many_images
    many_images: int | None = None
    null_content: bool = True  # an assistant turn that only calls tools may carry content null
    # a user message may follow tool results directly; False (Mistral's API refuses "Unexpected role
    # 'user' after role 'tool'"): the adapter sends one reply's tool results together, then an
    # assistant turn (models/message_order.py) before the next user message
    user_after_tool: bool = True
    seed_field: Literal["seed", "random_seed"] = "seed"  # the sampling seed's field name (Mistral: random_seed)
    key_env: str | None = None  # the environment variable that holds the key (None: no key needed)
    key_env_also: list[str] = Field(default_factory=list)  # others read when key_env is unset, in order
    note: str = ""  # where the rules come from


class CapabilityRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str  # as in model strings: openai, anthropic, gemini, openai-compat, vllm, ...
    model: str = "*"  # a glob over the model name (the part after the provider)
    set: dict[str, Any]


class CapabilityTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[CapabilityRule] = Field(default_factory=list)


def _read(path: Path) -> CapabilityTable:
    try:
        text = path.read_text()
        raw = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
        table = CapabilityTable.model_validate(raw)
        for rule in table.rules:  # every field must be one Capabilities knows, with a valid value
            Capabilities.model_validate(rule.set)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        detail = str(exc).splitlines()[0] if not isinstance(exc, ValidationError) else _first(exc)
        raise UserError(
            f"capability file {path} is unusable ({detail}); expected [[rules]] entries with provider, "
            "model (a glob) and set = {field = value}, as in deskbench/models/capabilities.toml"
        ) from exc
    return table


def _first(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"


@functools.cache
def builtin_table() -> CapabilityTable:
    return _read(BUILTIN_FILE)


class CapabilityRegistry:
    """The built-in rules plus the user's; `lookup` is what adapters and checks call."""

    def __init__(self, extra: CapabilityTable | None = None) -> None:
        self.rules = [*builtin_table().rules, *(extra.rules if extra else [])]

    @classmethod
    def load(cls, path: Path | None = None) -> CapabilityRegistry:
        if path is None and os.environ.get(ENV_FILE):
            path = Path(os.environ[ENV_FILE])
        return cls(_read(path) if path is not None else None)

    def matching(self, provider: str, model: str) -> list[CapabilityRule]:
        name = model.lower()
        return [r for r in self.rules
                if r.provider == provider and fnmatch.fnmatchcase(name, r.model.lower())]

    def lookup(self, provider: str, model: str) -> Capabilities:
        merged: dict[str, Any] = {}
        for rule in self.matching(provider, model):
            merged.update(rule.set)
        return Capabilities.model_validate(merged)


_registry: CapabilityRegistry | None = None


def registry() -> CapabilityRegistry:
    """The process's table: built-in rules plus DESKBENCH_CAPABILITIES (or use_capabilities)."""
    global _registry
    if _registry is None:
        _registry = CapabilityRegistry.load()
    return _registry


def use_capabilities(path: Path | None) -> None:
    """Load a user capability file for the rest of the process (the --capabilities flag)."""
    global _registry
    _registry = CapabilityRegistry.load(path)


def capabilities(model_id: str) -> Capabilities:
    """The rules for a model string as deskbench names models ("openai/gpt-5-mini")."""
    provider, _, name = model_id.partition("/")
    return registry().lookup(provider, name)
