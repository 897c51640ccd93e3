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


class ExternalAgent:
    name = "external"
    needs_model = False

    def __init__(self) -> None:
        self.command: list[str] = []
        self.timeout = TIMEOUT_SECONDS

    def configure(self, options: Mapping[str, object]) -> None:
        """From the run's options: --command (required)."""
        command = options.get("command")
        if not isinstance(command, str) or not command.strip():
            raise UserError('--agent external runs your agent: give --command "my-agent {question}" '
                            "(it gets the MCP server's URL in $DESKBENCH_MCP_URL)")
        try:
            self.command = shlex.split(command)
        except ValueError as exc:
            raise UserError(f"--command {command!r} cannot be split into arguments ({exc}); check its quotes") from exc

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        from deskbench.mcp.server import ENV_QUESTION, ENV_URL, OneEpisode, build_server, serve_http
        from deskbench.mcp.session import DocqaSession

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
