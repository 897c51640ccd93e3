"""`--agent external` in every track: an agent built elsewhere, given its track's tools over MCP.
What the tracks share lives here: the options (--command or --url, --timeout), the episode's MCP
server on 127.0.0.1 (a free port), and the agent's process or service call; each track adds only
its session (its tools and how they become a submission: tracks/<name>/mcp_tools.py).

--command: run once per episode, split as a shell would (shlex) but run without one, so the
question is one argument whatever it contains (`{question}` is replaced by it); the process gets
the server's URL in $DESKBENCH_MCP_URL, the question in $DESKBENCH_QUESTION, the task id in
$DESKBENCH_TASK_ID. The episode ends at the agent's answer tool (the process then has a few
seconds to exit before it is killed), at the process's exit (an error, with the end of its
stderr) or at the time limit; what the tools recorded is the episode, stored and scored like any
other. --url: a service POSTed once per episode (agents/service.py).

The URL handed over ($DESKBENCH_MCP_URL, the POST's mcp_url) carries the server's secret in its
path (server.SecretGate): a local process that finds the port gets 401/404. The episode belongs
to the first MCP session that calls a tool (server.OneEpisode); another session's calls are
refused and recorded nowhere."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from deskbench.agents.base import AgentResult
from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.mcp.server import McpTool
    from deskbench.requirements import Need

Status = Literal["ok", "error", "limit"]

TIMEOUT_SECONDS = 600.0  # an episode's wall time before the agent's process is killed
EXIT_GRACE_SECONDS = 5.0  # after the answer, how long the process may take to exit
STDERR_LINES = 20  # the end of the agent's stderr kept in an episode's error: its last lines (a
STDERR_TAIL = 2000  # traceback's exception comes last), at most this many characters of them
ENV_URL = "DESKBENCH_MCP_URL"  # where an external agent finds the server
ENV_QUESTION = "DESKBENCH_QUESTION"
ENV_TASK_ID = "DESKBENCH_TASK_ID"


class EpisodeSession(Protocol):
    """One episode's tools and record: `answered` is set when the episode is over (its answer
    tool, or a budget it ran past); `result` is the episode as the runner stores it."""

    answered: asyncio.Event

    def result(self, status: Status = "ok", error: str | None = None) -> AgentResult: ...


def timeout_of(value: object) -> float:
    """--timeout SECONDS (None: TIMEOUT_SECONDS), a positive number."""
    if value is None:
        return TIMEOUT_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise UserError(f"--timeout {value!r} is not valid; give the seconds an episode may take, more than 0")
    return float(value)


def external_options(option: Callable[..., object]) -> dict[str, object]:
    """--command / --url / --timeout for the agents that take them (external), from a run's
    `RunRequest.option`: what was given, with the timeout resolved when either mode is, so a
    resume without --timeout after `--timeout 2` is a configuration difference, not the same system."""
    given = {name: option(name) for name in ("command", "url", "timeout") if option(name) is not None}
    if ("command" in given or "url" in given) and "timeout" not in given:
        given["timeout"] = TIMEOUT_SECONDS
    return given


def stderr_tail(text: str) -> str:
    """The end of a process's stderr as an episode keeps it: the last STDERR_LINES lines, at most
    STDERR_TAIL characters (diagnose shows its last line, the exception, first)."""
    lines = text.rstrip().splitlines()[-STDERR_LINES:]
    return "\n".join(lines)[-STDERR_TAIL:].strip("\n")


class ExternalRunner:
    """The part of every track's external agent that is not its tools: configured from the run's
    options, it serves one episode's tools and drives the agent until the episode ends. A track's
    external agent subclasses it and calls `episode` from its `run`."""

    name = "external"
    needs_model = False  # the agent's own model is out of sight: --model is ignored

    def __init__(self) -> None:
        self.command: list[str] = []
        self.url: str | None = None
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

    def requires(self) -> list[Need]:
        """The mcp extra (the episode's server), and the program of --command or the service of
        --url: checked once configured, before the run directory exists (requirements.check_agent)."""
        from deskbench.requirements import MCP, Executable, Listening

        needs: list[Need] = [MCP]
        if self.command and "{question}" not in self.command[0]:
            needs.append(Executable(self.command[0], 'give the program\'s path, e.g. --command "./my-agent {question}"'))
        if self.url:
            needs.append(Listening(self.url))
        return needs

    async def episode(self, session: EpisodeSession, tools: Sequence[McpTool], *, server_name: str,
                      question: str, task_id: str) -> AgentResult:
        """Serve `tools` on 127.0.0.1 for this episode and run the agent (its command, or a POST to
        its service) until `session.answered`, its exit or the time limit."""
        from deskbench.mcp.server import build_server, serve_http

        if not self.command and not self.url:
            raise UserError('--agent external needs --command "my-agent {question}" or --url URL')
        async with serve_http(build_server(server_name, tools)) as mcp_url:
            if self.url:
                from deskbench.agents.service import ServiceRequest, call_service

                request = ServiceRequest(task_id=task_id, question=question, mcp_url=mcp_url)
                status, error = await call_service(self.url, request, session.answered, self.timeout)
                return session.result(status, error)
            status, error = await self._run_command(session, mcp_url, question, task_id)
        return session.result(status, error)

    async def _run_command(self, session: EpisodeSession, mcp_url: str, question: str,
                           task_id: str) -> tuple[Status, str | None]:
        argv = [a.replace("{question}", question) for a in self.command]
        env = {**os.environ, ENV_URL: mcp_url, ENV_QUESTION: question, ENV_TASK_ID: task_id}
        try:
            proc = await asyncio.create_subprocess_exec(*argv, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise UserError(f"--command: cannot start {argv[0]!r} ({exc.strerror}); check the program's path") from exc
        stderr = asyncio.ensure_future(proc.stderr.read() if proc.stderr else asyncio.sleep(0, b""))
        try:
            status, error = await self._wait(proc, session.answered)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        tail = stderr_tail((await stderr).decode(errors="replace"))
        if status == "error" and tail:
            error = f"{error}; its stderr ends:\n{tail}"
        return status, error

    async def _wait(self, proc: asyncio.subprocess.Process, answered: asyncio.Event) -> tuple[Status, str | None]:
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
            return "error", f"the agent exited (code {proc.returncode}) without its answer"
        exited.cancel()
        return "limit", f"no answer within {self.timeout:g} s; the agent was killed"
