"""`colbert-llm`: ColBERTv2 + Llama-3.1-8B as MDocAgent's repository sets it up (Table 3, 40.2):
the question's top-k page texts by ColBERTv2 (retrieval/text_retrieval.py; --text-retriever),
given to an LLM (the repository's Meta-Llama-3.1-8B-Instruct; here --model) in one user message:
each page's text and a line break, a line break, then the question alone (models/llama.py
create_text_message; config/agent/base.yaml's empty system prompt). The reply is the answer."""

from __future__ import annotations

from deskbench.agents.base import AgentContext, AgentResult, Recorder, recorded
from deskbench.tracks.docqa.agents.mdocagent.pipeline import (
    Answer,
    Modality,
    PipelineAgent,
    ask,
    finish,
    llama_messages,
    page_texts,
)
from deskbench.tracks.docqa.agents.mdocagent.prompts import BASE_SYSTEM
from deskbench.tracks.docqa.tasks import DocQATask


class ColbertLlmAgent(PipelineAgent):
    name = "colbert-llm"
    modalities: tuple[Modality, ...] = ("text",)

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        pages = await self.retrieve(ctx, rec, "text", task.question)
        texts = await page_texts(ctx, pages)
        reply, _ = await ask(rec, llama_messages(BASE_SYSTEM + task.question, texts))
        return finish(task, rec, Answer(reply, pages), [task.question])
