"""The consulting paper's three deep-research agents (§3.4, Table 5) as their providers deploy
them: each calls its provider's own research API (server-side web search and code execution)
instead of deskbench's chat loop and sandbox, so each is its own agent on the deliverables track.

- `claude-research` (anthropic.py): the Messages API with the web search and code execution
  tools, the package's inputs uploaded through the Files API, output files read back from
  Anthropic's sandbox.
- `openai-deep-research` (openai_dr.py): the Responses API in background mode with deep
  research, web search and a code-interpreter container pre-loaded with the inputs
  (`container.file_ids`); output files fetched through the Containers API.
- `gemini-deep-research` (gemini_dr.py): the Interactions API's deep-research agent; the Python
  its report embeds is extracted and run in deskbench's sandbox over the staged inputs.

pending.py keeps a long-running request's id beside the episode's folder, so a killed run picks
up the same background request instead of paying for a second one.

Agents are named here and imported when asked for (their HTTP clients are not loaded otherwise).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deskbench.runs.protocol import ProtocolNote
    from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions

# agent name -> "module:factory" under this package; the factory takes (options, web) as
# tracks/deliverables/agent.py's DELIVERABLE_AGENTS do; each module also has
# `protocol_notes(options)`, what the agent runs for the run's notes (runs/protocol.py)
AGENTS: dict[str, str] = {
    "claude-research": "anthropic:make",
    "gemini-deep-research": "gemini_dr:GeminiDeepResearchAgent",
    "openai-deep-research": "openai_dr:make",
}


def factory(name: str) -> Callable[..., Any]:
    """The agent's factory, imported on first use."""
    module, attr = AGENTS[name].split(":")
    made: Callable[..., Any] = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    return made


def module_name(name: str) -> str:
    """The agent's module: its prompt text is part of the system's identity (run.py PROMPT_MODULES)."""
    return f"{__name__}.{AGENTS[name].split(':')[0]}"


def protocol_notes(name: str, options: DeliverableOptions) -> list[ProtocolNote]:
    """What the agent runs (its provider's API, its web access), for the run's protocol notes."""
    notes: list[ProtocolNote] = importlib.import_module(module_name(name)).protocol_notes(options)
    return notes
