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
from typing import Any

# agent name -> "module:factory" under this package; the factory takes (options, web) as
# tracks/deliverables/agent.py's DELIVERABLE_AGENTS do
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
