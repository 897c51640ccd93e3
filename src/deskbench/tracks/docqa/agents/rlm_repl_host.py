"""The host end of the RLM's sandboxed REPL (rlm_repl.py): one process, restarted when it dies."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import re
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbench.sandbox.result import limit_message
from deskbench.tracks.docqa.agents import rlm_repl
from deskbench.tracks.docqa.agents.rlm_settings import RlmSettings

if TYPE_CHECKING:
    from deskbench.sandbox import Sandbox

REPL_SCRIPT = Path(rlm_repl.__file__)
FULL = re.compile(r"No space left on device|File too large|Disk quota exceeded")
JAIL_SCRIPT = "/sandbox/rlm_repl.py"
JAIL_CONTEXT = "/mnt/data/context.txt"


@dataclass
class ExecOutcome:
    stdout: str = ""
    stderr: str = ""
    error: bool = False
    stdout_chars: int = 0
    llm_queries: int = 0
    lost: str | None = None  # why the process is gone (died, timed out); None when it lives
    restart_failed: str | None = None  # why no new process could replace it
    seconds: float = 0.0

    def text(self) -> str:
        parts = [self.stdout] if self.stdout else []
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr)
        return "\n".join(parts) if parts else "(no output)"


QueryFn = Callable[[list[str]], Awaitable[list[str]]]  # raising QueryRefused reports into the REPL


class QueryRefused(Exception):
    """A sub-call the host will not or could not answer; the code sees it as an exception."""


def full_note(sandbox: Sandbox) -> str:
    """What the model reads when a write failed for lack of room."""
    lim = sandbox.limits
    return (f"[sandbox] a write failed: /mnt/result holds at most {lim.result_bytes // 1024**2} MB "
            f"and /tmp {lim.tmp_bytes // 1024**2} MB, no single file over "
            f"{lim.file_bytes // 1024**2} MB; delete files or keep data in variables")


class ReplProcess:
    """The host end of one REPL process: JSON lines in, JSON lines out, with a reader thread
    feeding an asyncio queue so a wall-time limit can stop waiting at any moment."""

    def __init__(self, sandbox: Sandbox, context_file: Path, loop: asyncio.AbstractEventLoop) -> None:
        """/mnt/result is the jail's own tmpfs capped at `limits.result_bytes` (the REPL's files
        are never collected), so code writing there cannot fill the host's disk."""
        self.sandbox = sandbox
        if sandbox.unsafe_local:  # no jail: the host paths are used as they are
            argv = ["python", "-E", "-s", "-B", str(REPL_SCRIPT), str(context_file)]
            self.proc = sandbox.spawn(argv)
        else:
            argv = ["python", "-E", "-s", "-B", JAIL_SCRIPT, JAIL_CONTEXT]
            self.proc = sandbox.spawn(argv, inputs=[context_file],
                                      extra_binds=[(REPL_SCRIPT, JAIL_SCRIPT)])
        self.loop = loop
        self.lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stderr_tail: collections.deque[bytes] = collections.deque(maxlen=40)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.loop.call_soon_threadsafe(self.lines.put_nowait, line)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                self.loop.call_soon_threadsafe(self.lines.put_nowait, None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            for line in self.proc.stderr:
                self.stderr_tail.append(line)
        except (OSError, ValueError):
            pass

    async def why_dead(self) -> str:
        """Why the REPL stopped answering. Its output closes a moment before the process is
        reaped: wait briefly for the exit status (and the last stderr) instead of guessing."""
        def reap() -> None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2.0)
            self._stderr_thread.join(timeout=0.5)

        await asyncio.to_thread(reap)
        code = self.proc.poll()
        tail = b"".join(self.stderr_tail).decode("utf-8", errors="replace").strip()[-600:]
        status = f"exit status {code}" if code is not None and code >= 0 else (
            f"killed by signal {-code}" if code is not None else "closed its output")
        usage = self.sandbox.usage(self.proc)
        if usage is not None and usage.oom_kills:
            status += "; " + limit_message("memory", self.sandbox.limits, oom_killed=True)
        if usage is not None and usage.pids_refused:
            status += "; " + limit_message("processes", self.sandbox.limits)
        return f"ended unexpectedly ({status})" + (f": {tail}" if tail else "")

    async def send(self, message: dict[str, Any]) -> bool:
        data = (json.dumps(message) + "\n").encode()

        def write() -> bool:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
                return True
            except (BrokenPipeError, OSError, ValueError):
                return False

        return await asyncio.to_thread(write)

    async def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message; None when the process is gone. TimeoutError past `timeout`."""
        line = await asyncio.wait_for(self.lines.get(), timeout)
        if line is None:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None  # not the protocol: treat as a dead REPL
        return message if isinstance(message, dict) else None

    async def ready(self, timeout: float) -> str | None:
        """None once the REPL has loaded `context`, else why it did not start."""
        try:
            message = await self.receive(timeout)
        except TimeoutError:
            return f"did not start within {timeout:g} s"
        if message is None or not message.get("ready"):
            return await self.why_dead()
        return None

    async def execute(self, code: str, wall: float, answer: QueryFn) -> ExecOutcome:
        started = time.monotonic()
        out = ExecOutcome()
        if not await self.send({"exec": code}):
            out.lost = await self.why_dead()
            return out
        left = wall
        while True:
            t0 = time.monotonic()
            try:
                message = await self.receive(max(left, 0.0))
            except TimeoutError:
                out.lost = f"was killed: the code ran past the wall-time limit of {wall:g} s"
                break
            left -= time.monotonic() - t0
            if message is None:
                out.lost = await self.why_dead()
                break
            if "llm_query" in message:
                prompts = [str(p) for p in message["llm_query"]]
                out.llm_queries += len(prompts)
                try:
                    reply: dict[str, Any] = {"results": await answer(prompts)}
                except QueryRefused as exc:
                    reply = {"error": str(exc)}
                if not await self.send(reply):
                    out.lost = await self.why_dead()
                    break
                continue
            if message.get("done"):
                out.stdout, out.stderr = str(message.get("stdout", "")), str(message.get("stderr", ""))
                if FULL.search(out.stderr):
                    out.stderr += "\n" + full_note(self.sandbox)
                out.error = bool(message.get("error"))
                out.stdout_chars = int(message.get("stdout_chars", 0))
                break
        out.seconds = round(time.monotonic() - started, 4)
        return out

    async def get_var(self, name: str, timeout: float) -> tuple[str | None, str]:
        """(the variable's value as text, "") or (None, the problem)."""
        if not await self.send({"get_var": name}):
            return None, f"the REPL process {await self.why_dead()}"
        try:
            message = await self.receive(timeout)
        except TimeoutError:
            return None, f"reading {name!r} took longer than {timeout:g} s"
        if message is None:
            return None, f"the REPL process {await self.why_dead()}"
        if "value" in message:
            return str(message["value"]), ""
        return None, str(message.get("error", "no value"))

    def kill(self) -> None:
        self.sandbox.kill(self.proc)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


class Repl:
    """The episode's REPL: restarted (state lost) when its process dies or times out."""

    def __init__(self, sandbox: Sandbox, context_file: Path, settings: RlmSettings) -> None:
        self.sandbox, self.context_file, self.settings = sandbox, context_file, settings
        self.process: ReplProcess | None = None
        self.starts = 0

    async def start(self) -> str | None:
        """None when a REPL is up, else why it could not start. Every process gets a fresh
        /mnt/result (a tmpfs of its own jail)."""
        loop = asyncio.get_running_loop()
        self.starts += 1
        try:  # spawning forks and execs: off the event loop
            self.process = await asyncio.to_thread(ReplProcess, self.sandbox, self.context_file, loop)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"could not be started: {exc}"
        problem = await self.process.ready(self.settings.start_seconds)
        if problem is not None:
            self.process.kill()
            self.process = None
        return problem

    async def execute(self, code: str, answer: QueryFn) -> ExecOutcome:
        """Run code; a process lost on the way is replaced at once (state gone)."""
        assert self.process is not None, "start() first"
        outcome = await self.process.execute(code, self.sandbox.limits.wall_seconds, answer)
        if outcome.lost is not None:
            self.process.kill()
            self.process = None
            outcome.restart_failed = await self.start()
        return outcome

    async def get_var(self, name: str) -> tuple[str | None, str]:
        if self.process is None:
            return None, "the REPL is not running"
        return await self.process.get_var(name, self.sandbox.limits.wall_seconds)

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process = None
