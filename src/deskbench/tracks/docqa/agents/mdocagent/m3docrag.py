"""`m3docrag`: M3DocRAG as MDocAgent's repository sets it up (Table 3's "M3DocRAG", 61.6): the
question's top-k page images by ColPali (retrieval/image_retrieval.py; --image-retriever), given
to an MLLM (the repository's Qwen2-VL-7B-Instruct; here --model) in one user message, the images
then the question alone (models/qwen.py create_image_message; config/agent/base.yaml's empty
system prompt; M3DocRAG's own vqa/qwen2.py sends the same). The reply is the answer."""

from __future__ import annotations

from deskbench.agents.base import AgentContext, AgentResult, Recorder, recorded
from deskbench.tracks.docqa.agents.mdocagent.pipeline import (
    Answer,
    Modality,
    PipelineAgent,
    ask,
    finish,
    page_images,
    qwen_messages,
)
from deskbench.tracks.docqa.agents.mdocagent.prompts import BASE_SYSTEM
from deskbench.tracks.docqa.tasks import DocQATask


class M3DocRagAgent(PipelineAgent):
    name = "m3docrag"
    modalities: tuple[Modality, ...] = ("image",)

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        pages = await self.retrieve(ctx, rec, "image", task.question)
        images = await page_images(ctx, pages)
        reply, _ = await ask(rec, qwen_messages(BASE_SYSTEM + task.question, None, images))
        return finish(task, rec, Answer(reply, pages), [task.question])
