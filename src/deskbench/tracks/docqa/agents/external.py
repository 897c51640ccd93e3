"""`--agent external`: an agent built elsewhere, run as a command once per task and given the
docqa tools over MCP (deskbench/mcp). For each episode a server on 127.0.0.1 (a free port) serves
that episode's tools; the command gets its URL in $DESKBENCH_MCP_URL and the question as
`{question}` and in $DESKBENCH_QUESTION. The episode ends at the agent's provide_answer (the
process then has a few seconds to exit before it is killed), at the process's exit, or at the
time limit; what the tools recorded is the episode, stored and scored like any other.

The command is split as a shell would (shlex) but run without one, so a question is one
argument whatever it contains."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Mapping

from deskbench.agents.base import AgentContext, AgentResult
from deskbench.errors import UserError
from deskbench.tasks.docqa import DocQATask

TIMEOUT_SECONDS = 600.0  # an episode's wall time before the agent's process is killed
EXIT_GRACE_SECONDS = 5.0  # after provide_answer, how long the process may take to exit
STDERR_TAIL = 4000  # characters of the agent's stderr kept in an episode's error


def timeout_of(value: object) -> float:
    """--timeout SECONDS (None: TIMEOUT_SECONDS), a positive number."""
    if value is None:
        return TIMEOUT_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise UserError(f"--timeout {value!r} is not valid; give the seconds an episode may take, more than 0")
    return float(value)


class ExternalAgent:
    name = "external"
    needs_model = False

    def __init__(self) -> None:
        self.command: list[str] = []
        self.url: str | None = None  # --url: a service POSTed once per episode (agents/service.py)
        self.timeout = TIMEOUT_SECONDS

    def configure(self, options: Mapping[str, object]) -> None:
        """From the run's options: exactly one of --command and --url; --timeout (seconds)."""
        command, url = options.get("command"), options.get("url")
        if bool(command) == bool(url):
            raise UserError('--agent external needs exactly one of --command "my-agent {question}" (a program run '
                            "per task, the MCP server's URL in $DESKBENCH_MCP_URL) and --url URL (a service POSTed per task)")
        self.timeout = timeout_of(options.get("timeout"))
        if isinstance(url, str):
            from deskbench.agents.service import check_url

            self.url = check_url(url)
            return
        if not isinstance(command, str) or not command.strip():
            raise UserError('--command is empty; give --command "my-agent {question}"')
        try:
            self.command = shlex.split(command)
        except ValueError as exc:
            raise UserError(f"--command {command!r} cannot be split into arguments ({exc}); check its quotes") from exc

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        from deskbench.mcp.server import ENV_QUESTION, ENV_URL, OneEpisode, build_server, serve_http
        from deskbench.mcp.session import DocqaSession

        if self.url:
            return await self._call_service(self.url, task, ctx)
        if not self.command:
            raise UserError('--agent external needs --command "my-agent {question}"')
        session = DocqaSession(ctx, task)
        async with serve_http(build_server(OneEpisode(session))) as url:
            argv = [a.replace("{question}", task.question) for a in self.command]
            env = {**os.environ, ENV_URL: url, ENV_QUESTION: task.question, "DESKBENCH_TASK_ID": str(task.id)}
            try:
                proc = await asyncio.create_subprocess_exec(*argv, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                            stdout=asyncio.subprocess.DEVNULL,
                                                            stderr=asyncio.subprocess.PIPE)
            except OSError as exc:
                raise UserError(f"--command: cannot start {argv[0]!r} ({exc.strerror}); check the program's path") from exc
            stderr = asyncio.ensure_future(proc.stderr.read() if proc.stderr else asyncio.sleep(0, b""))
            status, error = await self._wait(proc, session.answered)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            tail = (await stderr).decode(errors="replace").strip()[-STDERR_TAIL:]
        if session.answer is None and status == "error":
            error = f"{error}; stderr: {tail}" if tail else error
        return session.result(status, error)

    async def _call_service(self, url: str, task: DocQATask, ctx: AgentContext) -> AgentResult:
        """--url: one POST per episode; the service answers over the episode's MCP server."""
        from deskbench.agents.service import ServiceRequest, call_service
        from deskbench.mcp.server import OneEpisode, build_server, serve_http
        from deskbench.mcp.session import DocqaSession

        session = DocqaSession(ctx, task)
        async with serve_http(build_server(OneEpisode(session))) as mcp_url:
            request = ServiceRequest(task_id=str(task.id), question=task.question, mcp_url=mcp_url)
            status, error = await call_service(url, request, session.answered, self.timeout)
        return session.result(status, error)

    async def _wait(self, proc: asyncio.subprocess.Process, answered: asyncio.Event) -> tuple[str, str | None]:
        """Until the answer, the process's exit or the time limit: (status, error)."""
        exited = asyncio.ensure_future(proc.wait())
        answer = asyncio.ensure_future(answered.wait())
        try:
            done, _ = await asyncio.wait({exited, answer}, timeout=self.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            answer.cancel()
        if answer in done or answered.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(exited), EXIT_GRACE_SECONDS)
            exited.cancel()
            return "ok", None
        if exited in done:
            return "error", f"the agent exited (code {proc.returncode}) without provide_answer"
        exited.cancel()
        return "limit", f"no provide_answer within {self.timeout:.0f} s; the agent was killed"
