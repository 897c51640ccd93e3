"""The BM25 agent's protocols by name, which one is official for each provider, and the two presets.

Defaults follow ONE named source: the official code that produced the leaderboard's BM25 rows
(github OxRML/MADQA baselines/bm25-mllm-agent/process_dataset.py: --max-iterations 5, --top-k 4,
each provider's own script). The paper's Appendix G.1 (T = 10, k = 5, the Prompt 5 loop) is the
preset `paper`. The scripts' own command lines default to 5 iterations and top 3; nothing
published says which values the leaderboard's rows used beyond process_dataset.py's defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from deskbench.errors import UserError
from deskbench.tracks.docqa.agents.bm25_protocols.base import Bm25Protocol, official_source


def _paper() -> Bm25Protocol:
    from deskbench.tracks.docqa.agents.bm25_protocols.paper import PaperProtocol

    return PaperProtocol()


def _openai() -> Bm25Protocol:
    from deskbench.tracks.docqa.agents.bm25_protocols.openai_script import OpenAIScript

    return OpenAIScript()


def _gemini() -> Bm25Protocol:
    from deskbench.tracks.docqa.agents.bm25_protocols.gemini_script import GeminiScriptProtocol

    return GeminiScriptProtocol()


def _anthropic() -> Bm25Protocol:
    from deskbench.tracks.docqa.agents.bm25_protocols.anthropic_script import (
        AnthropicScriptProtocol,
    )

    return AnthropicScriptProtocol()


def _vllm() -> Bm25Protocol:
    from deskbench.tracks.docqa.agents.bm25_protocols.vllm_script import VllmScriptProtocol

    return VllmScriptProtocol()


def _vllm_on_mistral() -> Bm25Protocol:
    from deskbench.tracks.docqa.agents.bm25_protocols.vllm_script import VllmOnMistralProtocol

    return VllmOnMistralProtocol()


# name (as --protocol takes it) -> the protocol; one line per module of this package
PROTOCOLS: dict[str, Callable[[], Bm25Protocol]] = {
    "paper": _paper,
    "openai_agent.py": _openai,
    "anthropic_agent.py": _anthropic,
    "gemini_agent.py": _gemini,
    "vllm_agent.py": _vllm,
    "vllm_agent.py@mistral": _vllm_on_mistral,  # no official mistral_agent.py exists: vllm_agent.py on Mistral's API
}

# model provider (models/registry.py) -> the protocol of the official script that drives it
OFFICIAL_FOR_PROVIDER: dict[str, str] = {
    "openai": "openai_agent.py",
    "anthropic": "anthropic_agent.py",
    "google": "gemini_agent.py",  # Gemini's native API, as google.generativeai (the script's SDK) calls it
    # OpenAI-compatible servers, as vllm_agent.py drives a vLLM server
    "vllm": "vllm_agent.py",
    "openai-compat": "vllm_agent.py",
    "llamacpp": "vllm_agent.py",
    "ollama": "vllm_agent.py",
    "local": "vllm_agent.py",
    "mistral": "vllm_agent.py@mistral",  # the nearest published script (process_dataset.py's mistral_agent.py is missing)
}


def protocol(name: str) -> Bm25Protocol:
    """The protocol `name`; an unknown name is one line naming the choices."""
    if name not in PROTOCOLS:
        raise UserError(f"--protocol {name!r} is not known; choose official, paper or one of: "
                        f"{', '.join(n for n in PROTOCOLS if n != 'paper')}")
    return PROTOCOLS[name]()


@dataclass(frozen=True)
class Preset:
    """A named set of defaults for the BM25 agent, with where they come from."""

    name: str
    protocol: str  # "official" (the provider's official script) or a protocol name
    max_steps: int
    top_k: int
    source: str


PRESETS: dict[str, Preset] = {
    "official": Preset("official", "official", 5, 4,
                       f"{official_source('process_dataset.py')} defaults (--max-iterations 5, --top-k 4)"),
    "paper": Preset("paper", "paper", 10, 5, "MADQA paper, Appendix G.1 (T = 10, k = 5) and Prompt 5"),
}
DEFAULT_PRESET = "official"


@dataclass(frozen=True)
class Bm25Choice:
    """What a bm25-agent run runs, resolved from --preset, --protocol, --max-steps, --top-k and the
    model's provider; `sources` says where each value came from (kept with the run)."""

    protocol: str
    protocol_source: str
    max_steps: int
    top_k: int
    sources: dict[str, str] = field(default_factory=dict)
    warning: str | None = None  # the default preset fell back (a provider no official script covers)


def choose(provider: str, *, preset: str | None = None, protocol_name: str | None = None,
           max_steps: int | None = None, top_k: int | None = None) -> Bm25Choice:
    """Resolve a run's protocol and budgets. The default preset on a provider no official script
    covers falls back to the paper's preset, with a warning; asking for `official` explicitly
    there is an error naming the choices."""
    if preset is not None and preset not in PRESETS:
        raise UserError(f"--preset {preset!r} is not known; choose one of: {', '.join(PRESETS)}")
    if protocol_name is not None and protocol_name != "official":
        protocol(protocol_name)  # names the choices when unknown
    chosen = PRESETS[preset or DEFAULT_PRESET]
    warning = None
    wanted = protocol_name or chosen.protocol
    if wanted == "official" and provider not in OFFICIAL_FOR_PROVIDER:
        covered = ", ".join(f"{p} ({s})" for p, s in OFFICIAL_FOR_PROVIDER.items())
        if preset is not None or protocol_name is not None:
            flag = "--protocol official" if protocol_name else f"--preset {chosen.name}"
            raise UserError(f"{flag}: no official MADQA script drives the {provider!r} provider (they cover: "
                            f"{covered}); use --preset paper, or name a protocol with --protocol "
                            f"({', '.join(PROTOCOLS)})")
        warning = (f"no official MADQA script drives the {provider!r} provider: bm25-agent runs the paper's "
                   f"preset (Prompt 5 loop; T=10, k=5 unless given); name a protocol with --protocol ({', '.join(PROTOCOLS)})")
        chosen, wanted = PRESETS["paper"], "paper"
    name = OFFICIAL_FOR_PROVIDER[provider] if wanted == "official" else wanted
    steps = max_steps if max_steps is not None else chosen.max_steps
    k = top_k if top_k is not None else chosen.top_k
    sources = {  # by value, not by flag: an explicit --max-steps 10 is the paper's T all the same
        "protocol": (f"official for {provider} " if wanted == "official" else "") + f"({protocol(name).source})",
        "max_steps": _value_source(chosen, "max_steps", steps, "--max-steps"),
        "top_k": _value_source(chosen, "top_k", k, "--top-k"),
    }
    return Bm25Choice(protocol=name, protocol_source=protocol(name).source, max_steps=steps, top_k=k,
                      sources=sources, warning=warning)


def _value_source(chosen: Preset, setting: str, value: int, flag: str) -> str:
    """Where a value comes from: the chosen preset's source, else the other preset's, else the flag."""
    for preset in (chosen, *PRESETS.values()):
        if getattr(preset, setting) == value:
            return f"preset {preset.name}: {preset.source}"
    return f"{flag} (neither preset's)"
