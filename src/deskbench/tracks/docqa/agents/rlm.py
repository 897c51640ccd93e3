"""The RLM-style agent (`rlm`): MADQA Appendix G.5, Recursive Language Models.

The corpus is a `context` string in a sandboxed Python REPL (one long-lived process per
episode, see rlm_repl.py): every page's text under [FILE: doc.pdf] and [PAGE N] ... [END PAGE N]
markers, as the paper augments its corpus for citation extraction. The root model gets Prompt 9
and, for at most 30 root iterations (the RLM library's default, RLM(max_iterations=30) in
rlm/core/rlm.py, which the official baseline's RLMAgent does not change; --max-steps sets
another), writes ```repl``` blocks that are run in order; their output comes back truncated.
Code may call `llm_query` / `llm_query_batched`: the same model answers them through the
Recorder, so the trajectory and usage count them; there is no cap on them, as in the official
RLM (RlmSettings.max_sub_calls or --max-sub-calls sets one). A reply with FINAL(...) or
FINAL_VAR(name) (the paper's FINAL.VAR) outside code ends the loop; then the paper's
structured-output extraction step turns the raw answer into answer + citations with the same
model (schema, one repair turn). No final answer within the iterations: one more call asks for
one, as the RLM library's `_default_answer` does (counted in llm_calls, as the library's usage
counts it); only an empty reply to it ends the episode as "limit".

Effort: the official RLM baseline (baselines/recursive-lm/rlm_agent.py) writes no
`search_history` and no `iterations`; its `trajectory` dict holds `llm_calls`, the RLM usage
summary's total_calls over every model (root iterations and llm_query sub-calls; the extraction
step is a separate client and is not counted), with input/output tokens and execution_time.
The official evaluator (eval/evaluate.py) reads len(search_history), else `iterations`, else 0,
so it gives the official RLM output effort 0 (left out of Kuiper); the paper's RLM calibration
counts LLM calls. So an rlm episode stores `llm_calls` = root model calls + sub-calls that
reached the model, `steps` = the same (deskbench's effort, which the scorer reads first), and no
`iterations`, as the official output. Each code execution is a ToolCallStep "repl" ({"code"} ->
{"stdout_chars", "error", "llm_queries"}).

A REPL that dies or runs past the wall time of one execution (the sandbox's wall_seconds; time
spent waiting for sub-calls is not counted) is killed, restarted with `context` reloaded, and
the model is told its variables are gone. The process is always killed at episode end.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    Recorder,
    answer_once,
    recorded,
    submission_of,
)
from deskbench.corpus import Corpus
from deskbench.models.types import ChatRequest, Message, ModelError
from deskbench.tasks.docqa import DocQATask, ToolCallStep
from deskbench.tracks.docqa.agents import rlm_repl
from deskbench.tracks.docqa.agents.rlm_prompts import (
    CONTEXT_NOTE,
    DEFAULT_ANSWER,
    EXTRACT_SYSTEM,
    EXTRACT_USER,
    FIRST_TURN,
    LAST_TURN,
    NEXT_TURN,
    NO_ACTION,
    QUESTION,
    REPL_LOST,
    RLM_SYSTEM,
)

if TYPE_CHECKING:
    from deskbench.sandbox import Sandbox

REPL_SCRIPT = Path(rlm_repl.__file__)
JAIL_SCRIPT = "/sandbox/rlm_repl.py"
JAIL_CONTEXT = "/mnt/data/context.txt"


@dataclass(frozen=True)
class RlmSettings:
    output_chars: int = 4000  # REPL output shown to the root model per code block
    sub_concurrency: int = 4  # llm_query_batched prompts in flight at once
    max_iterations: int = 30  # root iterations when the run sets no --max-steps (the RLM library's default)
    max_sub_calls: int | None = None  # per episode; None: no cap, as the official RLM (--max-sub-calls sets one)
    start_seconds: float = 120.0  # REPL start-up, which reads the whole context
    final_chars: int = 20_000  # most of a FINAL_VAR value passed to the extraction step


# -- the corpus as one string ---------------------------------------------------------------


@dataclass(frozen=True)
class ContextStats:
    chars: int
    documents: int
    pages: int


def document_block(doc: str, texts: list[str]) -> str:
    """One document with the paper's markers; pages count from 1."""
    pages = "".join(f"[PAGE {n}]\n{text}\n[END PAGE {n}]\n" for n, text in enumerate(texts, start=1))
    return f"[FILE: {doc}]\n{pages}"


def write_context(corpus: Corpus, path: Path) -> ContextStats:
    """Every page of the corpus, document after document (blank line between), into `path`."""
    chars = pages = docs = 0
    with path.open("w", encoding="utf-8") as f:
        for record in corpus.documents():
            texts = corpus.page_texts([(record.doc_id, p) for p in range(1, record.page_count + 1)])
            block = ("\n" if docs else "") + document_block(record.doc_id, texts)
            f.write(block)
            chars += len(block)
            pages += len(texts)
            docs += 1
    path.chmod(0o644)  # read inside the jail by an unprivileged uid
    return ContextStats(chars=chars, documents=docs, pages=pages)


# -- reading the root model's replies ---------------------------------------------------------

_REPL_BLOCK = re.compile(r"```repl[ \t]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL)
_ANY_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_FINAL = re.compile(r"^[ \t>*`-]*FINAL(?P<var>[_.]VAR)?[ \t]*\(", re.MULTILINE)
_QUOTES = ('"""', "'''", '"', "'")


def repl_blocks(text: str) -> list[str]:
    """The ```repl``` blocks of a reply, in order (a block with no code is dropped)."""
    return [m.group(1) for m in _REPL_BLOCK.finditer(text) if m.group(1).strip()]


@dataclass(frozen=True)
class Final:
    kind: Literal["answer", "var"]
    text: str  # the answer, or the variable's name


def find_final(text: str) -> Final | None:
    """The first FINAL(...) / FINAL_VAR(...) / FINAL.VAR(...) that starts a line outside code
    blocks (markdown bullets, quotes and backticks before it allowed, since Prompt 9 shows it
    as a bulleted `FINAL(...)`). Parentheses are balanced, so FINAL(3 (approx.)) keeps its
    inner pair; quotes are not special, so an apostrophe does not swallow the rest. An
    unclosed FINAL( takes the rest of the reply (a reply cut off by the token limit)."""
    prose = _ANY_FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    match = _FINAL.search(prose)
    if match is None:
        return None
    start = match.end()
    depth, end = 1, len(prose)
    for i in range(start, len(prose)):
        if prose[i] == "(":
            depth += 1
        elif prose[i] == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    inner = prose[start:end].strip()
    if match.group("var"):
        return Final("var", inner.strip("`'\" \t\n"))
    for q in _QUOTES:
        if len(inner) >= 2 * len(q) and inner.startswith(q) and inner.endswith(q):
            inner = inner[len(q):-len(q)].strip()
            break
    return Final("answer", inner)


def shown(output: str, limit: int) -> str:
    """REPL output as the root model sees it: the head, and how much was cut."""
    if len(output) <= limit:
        return output
    return output[:limit] + f"\n... [{len(output) - limit} more characters not shown]"


# -- the REPL process ----------------------------------------------------------------------------


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


class ReplProcess:
    """The host end of one REPL process: JSON lines in, JSON lines out, with a reader thread
    feeding an asyncio queue so a wall-time limit can stop waiting at any moment."""

    def __init__(self, sandbox: Sandbox, context_file: Path, result_dir: Path,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.sandbox = sandbox
        if sandbox.unsafe_local:  # no jail: the host paths are used as they are
            argv = ["python", "-E", "-s", "-B", str(REPL_SCRIPT), str(context_file)]
            self.proc = sandbox.spawn(argv, result_dir=result_dir)
        else:
            argv = ["python", "-E", "-s", "-B", JAIL_SCRIPT, JAIL_CONTEXT]
            self.proc = sandbox.spawn(argv, inputs=[context_file], result_dir=result_dir,
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
        self.work = Path(tempfile.mkdtemp(prefix="deskbench-rlm-"))
        self.process: ReplProcess | None = None
        self.starts = 0

    async def start(self) -> str | None:
        """None when a REPL is up, else why it could not start. Every process gets a fresh
        /mnt/result: as root the jail hands the last one to that process's own uid."""
        loop = asyncio.get_running_loop()
        self.starts += 1
        result_dir = self.work / f"result-{self.starts}"
        try:  # spawning forks and execs: off the event loop
            self.process = await asyncio.to_thread(ReplProcess, self.sandbox, self.context_file,
                                                   result_dir, loop)
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
        shutil.rmtree(self.work, ignore_errors=True)


# -- the agent -------------------------------------------------------------------------------------


class CorpusContext:
    """The corpus written once as context.txt (a temp dir the agent owns) and shared by every
    episode of a run; rebuilt only for another corpus."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._root: Path | None = None
        self._stats: ContextStats | None = None

    async def get(self, corpus: Corpus) -> tuple[Path, ContextStats]:
        async with self._lock:
            if self._dir is None or self._root != corpus.root or self._stats is None:
                if self._dir is not None:
                    self._dir.cleanup()
                self._dir = tempfile.TemporaryDirectory(prefix="deskbench-rlm-context-")
                path = Path(self._dir.name) / "context.txt"
                self._stats = await asyncio.to_thread(write_context, corpus, path)
                self._root = corpus.root
            return Path(self._dir.name) / "context.txt", self._stats


@dataclass
class _Calls:
    """The episode's LLM calls so far (root iterations and answered sub-calls)."""

    made: int = 0


class RlmAgent:
    name = "rlm"

    def __init__(self, settings: RlmSettings = RlmSettings()) -> None:  # noqa: B008 - frozen
        self.settings = settings
        self.context = CorpusContext()

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        assert ctx.corpus is not None, "rlm needs a corpus"
        if ctx.sandbox is None:
            return rec.result("error", error="rlm runs model code: the run has no sandbox")
        context_file, stats = await self.context.get(ctx.corpus)
        repl = Repl(ctx.sandbox, context_file, self.settings)
        try:
            return await self._loop(task, ctx, rec, repl, stats)
        finally:
            repl.close()

    async def _loop(self, task: DocQATask, ctx: AgentContext, rec: Recorder, repl: Repl,
                    stats: ContextStats) -> AgentResult:
        problem = await repl.start()
        if problem is not None:
            return rec.result("error", error=f"the REPL {problem}")
        note = CONTEXT_NOTE.format(chars=stats.chars, documents=stats.documents, pages=stats.pages)
        messages = [
            Message(role="system", content=RLM_SYSTEM),
            Message(role="user", content=f"{note}\n\n{QUESTION.format(question=task.question)}\n\n{FIRST_TURN}"),
        ]
        calls = _Calls()
        answer_sub = self._sub_caller(rec, calls, ctx.settings.max_sub_calls)
        max_steps = ctx.settings.max_steps or self.settings.max_iterations
        for iteration in range(1, max_steps + 1):
            response = await rec.complete(ChatRequest(messages=messages))
            calls.made += 1
            reply = response.message.text()
            messages.append(Message(role="assistant", content=reply))
            feedback: list[str] = []
            blocks = repl_blocks(reply)
            for i, code in enumerate(blocks, start=1):
                out = await repl.execute(code, answer_sub)
                result: dict[str, Any] = {"stdout_chars": out.stdout_chars, "error": out.error or out.lost is not None,
                                          "llm_queries": out.llm_queries}
                if out.lost is not None:
                    result["repl_lost"] = out.lost
                rec.add(ToolCallStep(name="repl", arguments={"code": code}, result=result,
                                     seconds=out.seconds))
                if out.restart_failed is not None:
                    return rec.result("error", error=f"the REPL {out.lost} and could not be restarted: "
                                                     f"{out.restart_failed}")
                label = f"REPL output (block {i} of {len(blocks)}):" if len(blocks) > 1 else "REPL output:"
                if out.lost is None:
                    feedback.append(f"{label}\n{shown(out.text(), self.settings.output_chars)}")
                    continue
                partial = [shown(out.text(), self.settings.output_chars)] if out.stdout or out.stderr else []
                feedback.append("\n".join([label, *partial, REPL_LOST.format(why=out.lost)]))
                if i < len(blocks):
                    feedback.append(f"The remaining {len(blocks) - i} block(s) of your reply were not run.")
                break
            final = find_final(reply)
            if final is not None:
                raw, problem = await self._final_text(final, repl)
                if raw is not None:
                    return await self._extract(task, rec, raw, calls.made)
                feedback.append(problem)
            elif not blocks:
                feedback.append(NO_ACTION)
            turn = NEXT_TURN.format(question=task.question)
            if iteration + 1 == max_steps:
                turn += " " + LAST_TURN
            messages.append(Message(role="user", content="\n\n".join([*feedback, turn])))
        return await self._default_answer(task, rec, messages, calls, max_steps)

    async def _default_answer(self, task: DocQATask, rec: Recorder, messages: list[Message], calls: _Calls,
                              max_steps: int) -> AgentResult:
        """Out of root iterations without FINAL: as the RLM library, one more call asks for a final
        answer from what the conversation holds, and its reply is the raw answer. The library sends
        the request as an assistant turn; here it closes the last user turn, since some providers
        refuse a conversation that ends with an assistant turn (a prefill)."""
        last = messages[-1]
        messages = [*messages[:-1], Message(role="user", content=f"{last.content}\n\n{DEFAULT_ANSWER}")]
        response = await rec.complete(ChatRequest(messages=messages))
        calls.made += 1
        raw = response.message.text().strip()
        if not raw:
            return rec.result("limit", error=f"no FINAL answer after {max_steps} iterations, "
                                             "and an empty reply when asked for one")
        return await self._extract(task, rec, raw[: self.settings.final_chars], calls.made)

    def _sub_caller(self, rec: Recorder, calls: _Calls, cap: int | None) -> QueryFn:
        """llm_query's host side: the same model, one user message per prompt, at most
        sub_concurrency at once; at most `cap` (else RlmSettings.max_sub_calls) in the episode
        when one is set. Each answered call counts in `calls`."""
        slots = asyncio.Semaphore(self.settings.sub_concurrency)
        budget = cap if cap is not None else self.settings.max_sub_calls
        used = 0

        async def one(prompt: str) -> str:
            async with slots:
                response = await rec.complete(ChatRequest(messages=[Message(role="user", content=prompt)]))
            calls.made += 1
            return response.message.text()

        async def answer(prompts: list[str]) -> list[str]:
            nonlocal used
            if budget is not None and used + len(prompts) > budget:
                raise QueryRefused(f"the episode's budget of {budget} llm_query calls is spent "
                                   f"({used} used, {len(prompts)} asked for)")
            used += len(prompts)
            replies = await asyncio.gather(*(one(p) for p in prompts), return_exceptions=True)
            for r in replies:  # every call has finished: none is left running unobserved
                if isinstance(r, ModelError):
                    raise QueryRefused(f"llm_query failed: {r}") from r
                if isinstance(r, BaseException):
                    raise r
            return [r for r in replies if isinstance(r, str)]

        return answer

    async def _final_text(self, final: Final, repl: Repl) -> tuple[str | None, str]:
        """The raw final answer, or None and what to tell the model."""
        if final.kind == "answer":
            return final.text[: self.settings.final_chars], ""
        if not final.text.isidentifier():
            return None, f"FINAL_VAR({final.text}) needs the name of a REPL variable."
        value, problem = await repl.get_var(final.text)
        if value is None:
            return None, f"FINAL_VAR({final.text}): {problem}. Assign it in a ```repl``` block first."
        return value[: self.settings.final_chars], ""

    async def _extract(self, task: DocQATask, rec: Recorder, raw: str, llm_calls: int) -> AgentResult:
        """Appendix G.5's structured-output step: the same model normalises the raw answer (not
        counted in llm_calls, as the official baseline's separate client is not)."""
        messages = [Message(role="system", content=EXTRACT_SYSTEM),
                    Message(role="user", content=EXTRACT_USER.format(question=task.question, raw=raw))]
        args, problem = await answer_once(rec, messages)
        if args is None:
            return rec.result("error", error=f"unparseable answer: {problem}")
        return rec.result("ok", submission_of(task, args, steps=llm_calls, llm_calls=llm_calls))
