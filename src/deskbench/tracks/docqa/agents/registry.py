"""docqa's agents by the name `deskbench run --agent` takes."""

from __future__ import annotations

from collections.abc import Callable

from deskbench.errors import UserError
from deskbench.tracks.docqa.agents.bm25 import Bm25Agent
from deskbench.tracks.docqa.agents.external import ExternalAgent
from deskbench.tracks.docqa.agents.heaven import HeavenAgent
from deskbench.tracks.docqa.agents.lexical import LexicalAgent
from deskbench.tracks.docqa.agents.managed_rag.gemini_fs import GeminiFileSearchAgent
from deskbench.tracks.docqa.agents.managed_rag.openai_fs import OpenAIFileSearchAgent
from deskbench.tracks.docqa.agents.mdocagent import ColbertLlmAgent, M3DocRagAgent, MDocAgent
from deskbench.tracks.docqa.agents.protocol import Agent
from deskbench.tracks.docqa.agents.rlm import RlmAgent
from deskbench.tracks.docqa.agents.semtools.agent import SemtoolsAgent
from deskbench.tracks.docqa.agents.single_call import GuessAgent, OracleAgent, RagAgent

AGENTS: dict[str, Callable[[], Agent]] = {
    "bm25-agent": Bm25Agent,
    "rag": RagAgent,
    "oracle": OracleAgent,
    "guess": GuessAgent,
    "lexical": LexicalAgent,
    "rlm": RlmAgent,
    "external": ExternalAgent,  # an agent built elsewhere, over MCP (agents/external.py)
    "openai-file-search": OpenAIFileSearchAgent,  # MADQA G.2 managed RAG (agents/managed_rag/)
    "gemini-file-search": GeminiFileSearchAgent,
    "heaven": HeavenAgent,  # MADQA G.3: HEAVEN retrieval (--retriever heaven=...) then Prompt 7 (agents/heaven.py)
    "semtools-agent": SemtoolsAgent,  # MADQA G.4: the paper's tools and Prompt 8 on deskbench's loop (agents/semtools/)
    "m3docrag": M3DocRagAgent,  # Table 3's pipelines as MDocAgent's repository runs them (agents/mdocagent/)
    "colbert-llm": ColbertLlmAgent,
    "mdocagent": MDocAgent,
}
NEEDS_CORPUS = {"bm25-agent", "rag", "oracle", "lexical", "rlm", "external"}
NEEDS_CORPUS |= {"m3docrag", "colbert-llm", "mdocagent"}
NEEDS_CORPUS |= {"heaven"}
NEEDS_SANDBOX = {"rlm"}  # docqa agents that run model-written code
NEEDS_SANDBOX |= {"semtools-agent"}  # its Bash runs in the sandbox
NEEDS_CORPUS |= {"semtools-agent"}
NEEDS_CORPUS |= {"openai-file-search", "gemini-file-search"}  # the managed-RAG agents upload the corpus's PDFs
NO_MODEL = {"lexical", "external"}  # agents that call no model of ours: --model is ignored


def make_agent(name: str) -> Agent:
    """A built-in agent, else a plugin's (an entry point of `deskbench.agents`, or package.module:Name)."""
    if name not in AGENTS:
        from deskbench.agents.plugin_calls import agent_factory

        factory = agent_factory("docqa", name)
        if factory is not None:
            agent = factory()
            if not isinstance(agent, Agent):
                raise UserError(f"agent plugin {name!r} has no `name` or no `run`: a docqa agent is a class with "
                                "`name` and `async run(task, ctx)` (docs/plugins.md)")
            return agent
        from deskbench.contract.registry import tracks

        known = dict.fromkeys(a for t in tracks().values() for a in t.agents)  # external is every track's
        raise UserError(f"unknown agent {name!r}; choose one of: {', '.join(known)}, or a plugin (package.module:Name)")
    return AGENTS[name]()
