"""The BM25 MLLM agent: MADQA Algorithm 1 (Appendix G.1), run by one of its protocols.

The loop itself lives in bm25_protocols/: the paper's Prompt 5 loop (paper.py) or the official
script of the model's provider (openai_script.py, ...), chosen by the run's settings
(AgentSettings.protocol; `deskbench run --protocol/--preset`). The agent keeps what outlives an
episode: the search's cost estimate (where searches run, bm25_protocols/base.py).
"""

from __future__ import annotations

from deskbench.agents.base import AgentContext, AgentResult, recorded
from deskbench.tracks.docqa.agents.bm25_protocols import registry
from deskbench.tracks.docqa.agents.bm25_protocols.base import PageSearch
from deskbench.tracks.docqa.agents.bm25_protocols.paper import ANSWER_TOOL, SEARCH_TOOL  # noqa: F401  # the prompt hash's constants
from deskbench.tracks.docqa.agents.prompts import BM25_SYSTEM, SEARCH_DESCRIPTION  # noqa: F401  # the prompt hash's constants
from deskbench.tracks.docqa.tasks import DocQATask

MAX_STEPS = registry.PRESETS["paper"].max_steps
"""T when neither the run nor the settings give one: the paper's (Appendix G.1: T = 10, k = 5).
A run from the CLI always resolves it (bm25_protocols/registry.py choose)."""


class Bm25Agent:
    name = "bm25-agent"

    def __init__(self) -> None:
        self.pages = PageSearch()

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        assert ctx.corpus is not None, "bm25-agent needs a corpus"
        chosen = registry.protocol(ctx.settings.protocol)
        max_steps = ctx.settings.max_steps or MAX_STEPS
        return await recorded(ctx, lambda rec: chosen.run(task, ctx, rec, self.pages, max_steps))
