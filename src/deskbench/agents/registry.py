"""Agent names (as `deskbench run --agent` takes them) to agents."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from deskbench.agents.base import Agent
from deskbench.errors import UserError
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent
from deskbench.tracks.docqa.agents.lexical import LexicalAgent
from deskbench.tracks.docqa.agents.rlm import RlmAgent
from deskbench.tracks.docqa.agents.single_call import GuessAgent, OracleAgent, RagAgent

if TYPE_CHECKING:
    from deskbench.agents.analyst import AnalyticsAgent
    from deskbench.tracks.deliverables.agent import DeliverableOptions, DeliverablesAgent
    from deskbench.tracks.deliverables.web_backend import WebBackend

AGENTS: dict[str, Callable[[], Agent]] = {
    "bm25-agent": Bm25Agent,
    "rag": RagAgent,
    "oracle": OracleAgent,
    "guess": GuessAgent,
    "lexical": LexicalAgent,
    "rlm": RlmAgent,
}


def _analyst() -> AnalyticsAgent:
    from deskbench.agents.analyst import AnalystAgent  # imports the sandbox: only when asked for

    return AnalystAgent()


# analytics agents take an analytics task, a context with the sandbox, and a work directory
ANALYTICS_AGENTS: dict[str, Callable[[], AnalyticsAgent]] = {"analyst-agent": _analyst}


def _deliverable(options: DeliverableOptions | None = None, web: WebBackend | None = None) -> DeliverablesAgent:
    from deskbench.tracks.deliverables.agent import (
        DeliverableAgent,  # the sandbox: only when asked for
    )

    return DeliverableAgent(options, web)


# deliverables agents take a task package, the same context as analytics agents, and a work directory
DELIVERABLE_AGENTS: dict[str, Callable[..., DeliverablesAgent]] = {"deliverable-agent": _deliverable}
NEEDS_CORPUS = {"bm25-agent", "rag", "oracle", "lexical", "rlm"}
NEEDS_SANDBOX = {"rlm"}  # docqa agents that run model-written code
NO_MODEL = {"lexical"}  # baselines that call no model: --model is ignored


def make_agent(name: str) -> Agent:
    if name not in AGENTS:
        raise UserError(f"unknown agent {name!r}; choose one of: {', '.join([*AGENTS, *ANALYTICS_AGENTS, *DELIVERABLE_AGENTS])}")
    return AGENTS[name]()
