"""A custom docqa agent in 30 lines: one search with the question over the corpus its context
holds, the top pages' text to the model, its JSON answer citing those pages."""

import re

from deskbench.agents.base import AgentContext, AgentResult, parse_answer, stamped
from deskbench.models.types import ChatRequest, Message
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.tasks import DocQATask

PROMPT = ('Answer from these pages. Reply with JSON only: {{"answer": ["..."], '
          '"citations": [{{"file": "...", "page": 1}}]}}\n\n{pages}\n\nQuestion: {question}')


class KeywordAgent:
    name = "keyword-agent"
    track = "docqa"  # deskbench gives it docqa's AgentContext: model, corpus, settings

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        assert ctx.corpus is not None and ctx.model is not None, "run with --corpus and --model"
        query = " OR ".join(re.findall(r"\w+", task.question))  # any question word; BM25 ranks
        hits = ctx.corpus.search(query, k=ctx.settings.top_k, snippets=False)
        pages = "\n\n".join(f"[{h.document} page {h.page}]\n{ctx.corpus.page_text(h.document, h.page).text}"
                            for h in hits)
        search = stamped(ToolCallStep(name="search_documents", arguments={"query": query},
                                      result={"pages": [[h.document, h.page] for h in hits]}))
        reply = await ctx.model.complete(ChatRequest(messages=[
            Message(role="user", content=PROMPT.format(pages=pages, question=task.question))]))
        try:
            answer = parse_answer(reply.message.content if isinstance(reply.message.content, str) else "")
        except ValueError as exc:
            return AgentResult(status="error", error=f"unreadable answer: {exc}", trajectory=[search])
        return AgentResult(status="ok", submission=submission_of(task, answer, search_count=1),
                           trajectory=[search], usage=reply.usage)
