"""Model strings to adapters: "openai/gpt-5-mini", "openai-compat/qwen@http://127.0.0.1:8000/v1",
"anthropic/claude-sonnet-4-5", "local" (the bundled SmolLM2 on a llama.cpp server)."""

from __future__ import annotations

import os
from collections.abc import Callable

from deskbench.errors import UserError
from deskbench.models.openai_chat import OpenAIChat
from deskbench.models.types import ChatModel


def _openai(rest: str, timeout: float) -> ChatModel:
    if not rest:
        raise UserError("model 'openai/' needs a model name, e.g. openai/gpt-5-mini")
    return OpenAIChat(rest, timeout=timeout)


def _openai_compat(rest: str, timeout: float) -> ChatModel:
    name, sep, url = rest.partition("@")
    if not sep or not name or not url.startswith(("http://", "https://")):
        raise UserError(
            f"model 'openai-compat/{rest}' must look like openai-compat/<name>@<base url>, "
            "e.g. openai-compat/qwen3@http://127.0.0.1:8000/v1"
        )
    # Local servers ignore the key; hosted ones read it from the environment, never from the string.
    key = os.environ.get("OPENAI_COMPAT_API_KEY") or "not-needed"
    return OpenAIChat(name, base_url=url, api_key=key, timeout=timeout, id=f"openai-compat/{name}")


def _anthropic(rest: str, timeout: float) -> ChatModel:
    from deskbench.models.anthropic_chat import AnthropicChat

    if not rest:
        raise UserError("model 'anthropic/' needs a model name, e.g. anthropic/claude-sonnet-4-5")
    return AnthropicChat(rest, timeout=timeout)


def _local(rest: str, timeout: float) -> ChatModel:
    from deskbench.models.local_llama import LocalChat

    if rest not in ("", "smollm2", "smollm2-135m-instruct"):
        raise UserError(f"unknown local model {rest!r}; the bundled one is local/smollm2")
    return LocalChat()


PROVIDERS: dict[str, Callable[[str, float], ChatModel]] = {
    "openai": _openai,
    "openai-compat": _openai_compat,
    "anthropic": _anthropic,
    "local": _local,
}


def make_model(spec: str, *, timeout: float = 120.0) -> ChatModel:
    """The adapter for a model string (without the retry/cache wrapper)."""
    provider, _, rest = spec.partition("/")
    factory = PROVIDERS.get(provider)
    if factory is None:
        raise UserError(
            f"unknown model provider {provider!r} in {spec!r}; use one of: "
            + ", ".join(f"{p}/..." for p in sorted(PROVIDERS))
        )
    return factory(rest, timeout)
