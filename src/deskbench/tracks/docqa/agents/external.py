"""`--agent external` on docqa: an agent built elsewhere, given search_documents, get_page and
provide_answer over MCP (tracks/docqa/mcp_tools.py), once per task. How it is run (--command, or a
service POSTed with --url), the episode's server and its end are the shared runner's
(deskbench/mcp/external.py); this module adds only docqa's session."""

from __future__ import annotations

from deskbench.agents.base import AgentContext, AgentResult
from deskbench.mcp.external import ExternalRunner
from deskbench.tracks.docqa.tasks import DocQATask


class ExternalAgent(ExternalRunner):
    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        from deskbench.mcp.server import OneEpisode
        from deskbench.tracks.docqa.mcp_session import DocqaSession
        from deskbench.tracks.docqa.mcp_tools import SERVER_NAME, docqa_tools

        session = DocqaSession(ctx, task)
        return await self.episode(session, docqa_tools(OneEpisode(session)), server_name=SERVER_NAME,
                                  question=task.question, task_id=str(task.id))
