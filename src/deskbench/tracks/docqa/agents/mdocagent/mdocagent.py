"""`mdocagent`: MDocAgent (Han et al. 2025; Table 3, 63.8) as agents/mdoc_agent.py and
multi_agent_system.py run it, one episode per question:

1. text retrieval (ColBERTv2; --text-retriever) and image retrieval (ColPali; --image-retriever)
   of the question, each giving its top-k pages;
2. General agent: the General prompt and the question, asked with the page texts (one message)
   and with the page images (another), its answer kept in its conversation;
3. Critical agent: the same conversation asked the Critical prompt (no pages); the reply's text
   from its first "{" to its first "}" read as JSON for a "text" clue and an "image" clue
   (either empty when it does not read);
4. Text agent: the Text prompt, the question, "You may use the given clue:" and the text clue,
   with the page texts (Llama's message shape);
5. Image agent: the Image prompt, the question, the joint and the image clue, with the page images;
6. Summarising agent: the Sum prompt then "General Agent:\\n<answer>\\nText Agent:\\n<answer>\\n
   Image Agent:\\n<answer>\\n"; its reply read as JSON for "Answer" (the reply itself when it does
   not read as a JSON object).

Every agent answers with --model (the repository: Qwen2-VL-7B for General, Image and Summarising,
Llama-3.1-8B for Text)."""

from __future__ import annotations

import json

from deskbench.agents.base import AgentContext, AgentResult, Recorder, recorded
from deskbench.models.types import Message, TextPart
from deskbench.tracks.docqa.agents.mdocagent.pipeline import (
    Answer,
    Modality,
    PipelineAgent,
    ask,
    cited,
    finish,
    llama_messages,
    page_images,
    page_texts,
    qwen_messages,
)
from deskbench.tracks.docqa.agents.mdocagent.prompts import (
    CLUE_JOINT,
    CRITICAL_PROMPT,
    GENERAL_SYSTEM,
    IMAGE_SYSTEM,
    SUM_SYSTEM,
    TEXT_SYSTEM,
)
from deskbench.tracks.docqa.tasks import DocQATask


def clues(reply: str) -> tuple[str, str]:
    """The Critical agent's text and image clues, as mdoc_agent.py reads them: the reply from its
    first "{" to its first "}" as JSON, its "text" and "image" ("" when it does not read). A clue
    that is not a string is joined as JSON (the original would fail on it: str + dict)."""
    start, end = reply.find("{"), reply.find("}") + 1
    try:
        found = json.loads(reply[start:end])
        text, image = found.get("text", ""), found.get("image", "")
    except Exception:  # noqa: BLE001 - the original's bare except: any failure leaves the clues empty
        return "", ""
    return _clue(text), _clue(image)


def _clue(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def final_answer(reply: str) -> object:
    """multi_agent_system.py extract_final_answer: json.loads(reply).get("Answer"), else the reply."""
    try:
        return json.loads(reply).get("Answer", None)
    except Exception:  # noqa: BLE001 - the original's bare except (not JSON, or JSON without .get)
        return reply


class MDocAgent(PipelineAgent):
    name = "mdocagent"
    modalities: tuple[Modality, ...] = ("text", "image")

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        question = task.question
        text_pages = await self.retrieve(ctx, rec, "text", question)
        image_pages = await self.retrieve(ctx, rec, "image", question)
        texts = await page_texts(ctx, text_pages)
        images = await page_images(ctx, image_pages)

        general, conversation = await ask(rec, qwen_messages(GENERAL_SYSTEM + question, texts, images))
        critical, _ = await ask(rec, [*conversation, Message(role="user", content=[TextPart(text=CRITICAL_PROMPT)])])
        text_clue, image_clue = clues(critical)
        everything = "General Agent:\n" + general + "\n"
        text_reply, _ = await ask(rec, llama_messages(TEXT_SYSTEM + question + CLUE_JOINT + text_clue, texts))
        everything += "Text Agent:\n" + text_reply + "\n"
        image_reply, _ = await ask(rec, qwen_messages(IMAGE_SYSTEM + question + CLUE_JOINT + image_clue, None, images))
        everything += "Image Agent:\n" + image_reply + "\n"
        summary, _ = await ask(rec, qwen_messages(SUM_SYSTEM + everything, None, None))
        return finish(task, rec, Answer(final_answer(summary), cited(text_pages, image_pages)), [question, question])
