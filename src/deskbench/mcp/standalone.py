"""`deskbench mcp` outside a run: the agent is the user's to start, so each provide_answer ends
an episode (stored at once under system 'external', task ids mcp-1, mcp-2, ...) and the next
call starts a new one. With no gold answer these episodes are kept, not scored."""

from __future__ import annotations

from pathlib import Path

from deskbench.agents.base import AgentContext, AgentSettings
from deskbench.corpus import Corpus
from deskbench.mcp.docqa import SERVER_NAME, docqa_tools
from deskbench.mcp.server import build_server
from deskbench.mcp.server import serve as serve_server
from deskbench.mcp.session import DocqaSession
from deskbench.runs.store import Episode, RunStore, now
from deskbench.tasks.docqa import DocQATask

SYSTEM = "external"
NO_GOLD = "(no gold answer: served by deskbench mcp)"


class Episodes:
    """A new session after each answer; each answered one stored in the run."""

    def __init__(self, ctx: AgentContext, store: RunStore, question: str) -> None:
        self.ctx, self.store, self.question = ctx, store, question
        self.count = 0
        self.started = now()
        self.session = self._next()

    def _next(self) -> DocqaSession:
        self.count += 1
        self.started = now()
        task = DocQATask(id=f"mcp-{self.count}", question=self.question, answer_variants=[[NO_GOLD]])
        self.store.save_tasks([task])
        return DocqaSession(self.ctx, task)

    def current(self) -> DocqaSession:
        return self.session

    async def answered(self, session: DocqaSession) -> None:
        result = session.result()
        self.store.record(Episode(task_id=str(session.task.id), system=SYSTEM, status=result.status,
                                  error=result.error, submission=result.submission, trajectory=result.trajectory,
                                  usage=result.usage, started_at=self.started, finished_at=now()),
                          replace=True, transcript=result.transcript)
        self.session = self._next()


async def serve(corpus: Path, out: Path, *, transport: str, port: int, question: str, top_k: int) -> None:
    ctx = AgentContext(model=None, corpus=Corpus.open(corpus), settings=AgentSettings(top_k=top_k))
    source = Episodes(ctx, RunStore(out), question)
    await serve_server(build_server(SERVER_NAME, docqa_tools(source)), transport, port)
