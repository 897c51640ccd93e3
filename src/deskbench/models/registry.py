"""Model strings to adapters: "openai/gpt-5-mini", "anthropic/claude-sonnet-4-5",
"gemini/gemini-2.5-flash" (Gemini's OpenAI-compatible endpoint), "google/gemini-2.5-flash" (its
native API, models/gemini_native.py), "mistral/pixtral-large-latest", "openai-compat/qwen@http://127.0.0.1:8000/v1" (and the same form
under vllm/, llamacpp/, ollama/, whose capability rules differ), "local" (the bundled SmolLM2
on a llama.cpp server), "scripted:FILE" (replies from a file, models/scripted.py; also scripted/FILE).

`preflight` checks a model string, its key and the user's settings without building a client,
so a run can refuse before it creates anything; `open_model` builds the adapter inside its
retry/cache/usage wrapper with the settings resolved against the capability table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.errors import UserError
from deskbench.models.capabilities import capabilities
from deskbench.models.settings import ResolvedSettings, Role, Sampling, asked_for, resolve

if TYPE_CHECKING:  # the adapters (and their SDKs) are imported when a model is opened, not when the CLI starts
    from deskbench.models.resilient import ResilientModel
    from deskbench.models.types import ChatModel

GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
MISTRAL_URL = "https://api.mistral.ai/v1"
OLLAMA_URL = "http://127.0.0.1:11434/v1"
COMPAT = ("openai-compat", "vllm", "llamacpp", "ollama")  # NAME@URL, key from OPENAI_COMPAT_API_KEY


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    name: str
    url: str | None = None  # the OpenAI-compatible servers' base URL
    path: str | None = None  # the file a scripted model answers from

    @property
    def id(self) -> str:
        """How the model is named in run stores, caches, prices and capability rules."""
        if self.provider == "local":
            from deskbench.models.local_llama import MODEL_ID

            return MODEL_ID
        return f"{self.provider}/{self.name}"


SCRIPTED_PREFIXES = ("scripted:", "scripted/")  # read before the plugin form package.module:factory/MODEL


def parse_spec(spec: str) -> ModelSpec:
    if spec.startswith(SCRIPTED_PREFIXES):
        path = spec[len("scripted:"):]
        if not path:
            raise UserError(f"model {spec!r} needs a file: scripted:FILE, e.g. "
                            "scripted:examples/custom_agent/demo_answers.jsonl")
        return ModelSpec("scripted", Path(path).stem or path, path=path)
    provider, _, rest = spec.partition("/")
    if provider not in PROVIDERS and plugin_provider(provider) is None:
        raise UserError(
            f"unknown model provider {provider!r} in {spec!r}; use one of: "
            + ", ".join(f"{p}/..." for p in sorted(PROVIDERS))
            + " (or an installed plugin's, see deskbench list models, or package.module:factory/MODEL)"
        )
    if provider == "local":
        if rest not in ("", "smollm2", "smollm2-135m-instruct"):
            raise UserError(f"unknown local model {rest!r}; the bundled one is local/smollm2")
        return ModelSpec("local", "smollm2-135m-instruct")
    if provider in COMPAT:
        name, sep, url = rest.partition("@")
        if provider == "ollama" and not sep:
            name, sep, url = rest, "@", OLLAMA_URL
        if not sep or not name or not url.startswith(("http://", "https://")):
            from deskbench.redact import redact_text

            raise UserError(
                f"model '{redact_text(spec)}' must look like {provider}/<name>@<base url>, "
                f"e.g. {provider}/qwen3@http://127.0.0.1:8000/v1"
            )
        return ModelSpec(provider, name, url)
    if not rest:
        example = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash",
                   "mistral": "pixtral-large-latest", "google": "gemini-2.5-flash"}.get(
            provider, "MODEL")
        raise UserError(f"model '{provider}/' needs a model name, e.g. {provider}/{example}")
    return ModelSpec(provider, rest)


def _openai(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.openai_chat import OpenAIChat

    return OpenAIChat(m.name, timeout=timeout)


def _gemini(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.openai_chat import OpenAIChat

    # GEMINI_BASE_URL points it elsewhere (a proxy, or a local simulator in the tests).
    return OpenAIChat(m.name, base_url=os.environ.get("GEMINI_BASE_URL") or GEMINI_URL,
                      api_key=os.environ["GEMINI_API_KEY"], timeout=timeout, id=m.id)


def _mistral(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.openai_chat import OpenAIChat

    # Mistral's chat completions take the OpenAI wire form with the differences its capability
    # rules state (random_seed, the role order after tool results, 8 images); MISTRAL_BASE_URL
    # points it elsewhere (a proxy, or the local simulator in the tests).
    return OpenAIChat(m.name, base_url=os.environ.get("MISTRAL_BASE_URL") or MISTRAL_URL,
                      api_key=os.environ["MISTRAL_API_KEY"], timeout=timeout, id=m.id)


def _compat(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.openai_chat import OpenAIChat

    # Local servers ignore the key; hosted ones read it from the environment, never from the string.
    key = os.environ.get("OPENAI_COMPAT_API_KEY") or "not-needed"
    return OpenAIChat(m.name, base_url=m.url, api_key=key, timeout=timeout, id=m.id)


def _google(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.gemini_native import GeminiNative

    # the native generateContent API; GOOGLE_GEMINI_BASE_URL points it elsewhere (models/gemini_native.py)
    return GeminiNative(m.name, timeout=timeout, id=m.id)


def _anthropic(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.anthropic_chat import AnthropicChat

    return AnthropicChat(m.name, timeout=timeout)


def _local(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.local_llama import LocalChat

    return LocalChat()


def _scripted(m: ModelSpec, timeout: float) -> ChatModel:
    from deskbench.models.scripted import ScriptedChat, read_script

    assert m.path is not None
    return ScriptedChat(read_script(Path(m.path)), m.name)


PROVIDERS: dict[str, Callable[[ModelSpec, float], ChatModel]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "google": _google,
    "mistral": _mistral,
    "openai-compat": _compat,
    "vllm": _compat,
    "llamacpp": _compat,
    "ollama": _compat,
    "local": _local,
    "scripted": _scripted,
}
BUILTIN_PROVIDERS = tuple(PROVIDERS)


def plugin_provider(name: str) -> Callable[[ModelSpec, float], ChatModel] | None:
    """A provider from a plugin (entry point of `deskbench.models`, or package.module:factory),
    consulted after the built-ins: a callable (ModelSpec, timeout) -> ChatModel."""
    from deskbench.plugins import lookup

    found = lookup("models", name)
    if found is None:
        return None
    if not callable(found.value):
        raise UserError(f"model provider plugin {name!r} ({found.origin}) is not callable; "
                        "point it at a function (ModelSpec, timeout) -> ChatModel")
    return found.value


def provider(name: str) -> Callable[[ModelSpec, float], ChatModel]:
    found = PROVIDERS.get(name) or plugin_provider(name)
    if found is None:
        raise UserError(f"unknown model provider {name!r}; see deskbench list models")
    return found


def check_key(m: ModelSpec) -> None:
    """The provider's key is in the environment, or one line saying which variable to set."""
    caps = capabilities(m.id)
    names = [caps.key_env, *caps.key_env_also] if caps.key_env else []
    if names and not any(os.environ.get(name) for name in names):
        raise UserError(f"{m.id} needs an API key: set {' or '.join(names)} in the environment "
                        "(or run offline with --model local)")


def _checked(spec: str) -> ModelSpec:
    m = parse_spec(spec)
    check_key(m)
    if m.path is not None:  # a scripted model's file, read whole: a bad one stops here, before the run
        from deskbench.models.scripted import read_script

        read_script(Path(m.path))
    return m


def _settings(m: ModelSpec, sampling: Sampling | None, role: Role) -> ResolvedSettings:
    return resolve(m.id, sampling if sampling is not None else asked_for(role), role)


def preflight(spec: str, sampling: Sampling | None = None, role: Role = "agent") -> ResolvedSettings:
    """Everything about a model string that can be checked without calling it: the string, the
    key, the settings. Raises UserError; builds no client and creates nothing."""
    return _settings(_checked(spec), sampling, role)


def make_model(spec: str, *, timeout: float = 120.0) -> ChatModel:
    """The adapter for a model string (without the retry/cache wrapper)."""
    m = _checked(spec)
    return provider(m.provider)(m, timeout)


def open_model(spec: str, *, role: Role = "agent", sampling: Sampling | None = None, concurrency: int = 16,
               cache: bool | Path = False, prices: Path | None = None, timeout: float = 120.0) -> ResilientModel:
    """The model an agent or a judge talks to: the adapter inside retries, a concurrency limit,
    usage accounting, the response cache (on for judges by the caller's choice; a path names the
    cache file), and the user's settings (given, else the command line's for the role) resolved
    against the capability table and sent with every call; under `--batch` (models/batch/base.py
    batch_mode) a BatchedModel, whose calls go through the provider's batch API."""
    from deskbench.models.cache import ResponseCache
    from deskbench.models.prices import PriceTable
    from deskbench.models.resilient import ResilientModel

    m = _checked(spec)
    settings = _settings(m, sampling, role)
    if m.path is not None:  # a scripted model replies from its file, free: a cache would keep an old file's replies
        cache = False
    response_cache = None
    if isinstance(cache, Path):
        response_cache = ResponseCache(cache)
    elif cache:
        cache_dir = Path(os.environ.get("DESKBENCH_CACHE_DIR", Path.home() / ".cache" / "deskbench"))
        response_cache = ResponseCache(cache_dir / "responses.sqlite")
    model = ResilientModel(provider(m.provider)(m, timeout), settings=settings, concurrency=concurrency,
                           cache=response_cache, prices=PriceTable.load(prices))
    from deskbench.models.batch.base import wrap

    return wrap(model, role)  # under --batch, its calls go through the provider's batch API (models/batch/)
