"""The host side of the semtools-agent's machine: the corpus staged once per run (its PDFs and
their Markdown, the three commands, the static model) and one tool server per episode in the
sandbox (shell.py), spoken to in JSON lines.

What the jail sees (bubblewrap; read-only unless said):
  /mnt/corpus/pdfs/DOC          each stored PDF of the corpus      (Prompt 8's {PDF_PATH})
  /mnt/corpus/markdown/DOC.md   its page text as Markdown           (Prompt 8's {MARKDOWN_PATH})
  /opt/semtools/bin/            search, parse, workspace (on PATH)
  /opt/semtools/cli.py, manifest.json, model/   the commands' code, parse's lookup, the model
  /mnt/result                   the working directory (writable tmpfs, CLAUDE.md written there)
  /tmp                          HOME: ~/.parse and ~/.semtools live for the episode
With --unsafe-local the same files are used at their host paths (no jail).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbench.corpus import Corpus
from deskbench.sandbox.stale import tagged_prefix
from deskbench.tracks.docqa.agents.semtools import cli, shell

if TYPE_CHECKING:
    from deskbench.sandbox import Sandbox

CLI_SCRIPT = Path(cli.__file__)
SHELL_SCRIPT = Path(shell.__file__)
MODEL_FILES = ("config.json", "tokenizer.json", "model.safetensors")
JAIL = {"pdfs": "/mnt/corpus/pdfs", "markdown": "/mnt/corpus/markdown", "opt": "/opt/semtools",
        "shell": "/sandbox/semtools_shell.py", "cwd": "/mnt/result"}
START_SECONDS = 60.0
GRACE_SECONDS = 30.0  # past a Bash call's own timeout before the host gives up on the process


@dataclass
class Stage:
    """The staged corpus for one run (a temp folder the agent owns) and the paths the tools see."""

    folder: Path
    pdfs: str
    markdown: str
    opt: str
    binds: list[tuple[Path, str]] = field(default_factory=list)
    documents: int = 0

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def stage(corpus: Corpus, model: Path, python: str, jail: bool) -> Stage:
    """Write every document's Markdown (cli.page_markdown of its page texts), parse's manifest
    (sha256 -> Markdown path), the three command scripts; collect the binds the jail needs."""
    folder = Path(tempfile.mkdtemp(prefix=tagged_prefix("semtools")))
    os.chmod(folder, 0o755)
    md_dir, opt = folder / "markdown", folder / "opt"
    (opt / "bin").mkdir(parents=True)
    md_dir.mkdir()
    pdf_dir = folder / "pdfs"
    where = JAIL if jail else {"pdfs": str(pdf_dir), "markdown": str(md_dir), "opt": str(opt)}
    st = Stage(folder=folder, pdfs=where["pdfs"], markdown=where["markdown"], opt=where["opt"])
    manifest: dict[str, str] = {}
    if not jail:
        pdf_dir.mkdir()
    for record in corpus.documents():
        texts = corpus.page_texts([(record.doc_id, p) for p in range(1, record.page_count + 1)])
        name = f"{record.doc_id}.md"
        (md_dir / name).write_text(cli.page_markdown(texts), encoding="utf-8")
        manifest[record.content_hash] = f"{st.markdown}/{name}"
        stored = corpus.stored_file(record)
        if jail:
            st.binds.append((stored, f"{st.pdfs}/{record.doc_id}"))
        else:
            (pdf_dir / record.doc_id).symlink_to(stored)
        st.documents += 1
    (opt / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    code = f"{JAIL['opt']}/cli.py" if jail else str(CLI_SCRIPT)
    for command in ("search", "parse", "workspace"):
        script = opt / "bin" / command
        script.write_text(f'#!/bin/sh\nexec {python} -E -s -B {code} {command} "$@"\n', encoding="utf-8")
        script.chmod(0o755)
    if jail:
        st.binds += [(md_dir, st.markdown), (opt / "bin", f"{st.opt}/bin"), (CLI_SCRIPT, f"{st.opt}/cli.py"),
                     (opt / "manifest.json", f"{st.opt}/manifest.json")]
        st.binds += [((model / f).resolve(), f"{st.opt}/model/{f}") for f in MODEL_FILES]
        st.binds.append((SHELL_SCRIPT, JAIL["shell"]))
    else:
        (opt / "model").symlink_to(model.resolve())
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            if not os.path.islink(os.path.join(root, f)):
                os.chmod(os.path.join(root, f), 0o755 if root.endswith("bin") else 0o644)
    return st


@dataclass
class Outcome:
    output: str
    is_error: bool
    seconds: float = 0.0
    lost: str | None = None  # why the tool process is gone (then restarted, its state lost)


class ToolProcess:
    """One shell.py process in the sandbox, JSON lines both ways; a reader thread feeds an
    asyncio queue so a call can stop waiting at its time limit."""

    def __init__(self, sandbox: Sandbox, st: Stage, claude_md: str, loop: asyncio.AbstractEventLoop) -> None:
        self.sandbox = sandbox
        jail = not sandbox.unsafe_local
        config = {"cwd": JAIL["cwd"] if jail else None, "files": {"CLAUDE.md": claude_md},
                  "env": {"SEMTOOLS_MODEL_DIR": f"{st.opt}/model", "SEMTOOLS_PARSED": f"{st.opt}/manifest.json"},
                  "path_first": f"{st.opt}/bin"}
        script = JAIL["shell"] if jail else str(SHELL_SCRIPT)
        argv = ["python", "-E", "-s", "-B", script, json.dumps(config)]
        self.proc = sandbox.spawn(argv, extra_binds=st.binds) if jail else sandbox.spawn(argv)
        self.loop = loop
        self.lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stderr_tail: collections.deque[bytes] = collections.deque(maxlen=40)
        threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, False), daemon=True).start()

    def _pump(self, pipe: Any, protocol: bool) -> None:
        try:
            for line in pipe:
                if protocol:
                    self.loop.call_soon_threadsafe(self.lines.put_nowait, line)
                else:
                    self.stderr_tail.append(line)
        except (OSError, ValueError):
            pass
        finally:
            if protocol:
                with contextlib.suppress(RuntimeError):
                    self.loop.call_soon_threadsafe(self.lines.put_nowait, None)

    async def receive(self, timeout: float) -> dict[str, Any] | None:
        line = await asyncio.wait_for(self.lines.get(), timeout)
        if line is None:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None

    def why_dead(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        code = self.proc.poll()
        tail = b"".join(self.stderr_tail).decode("utf-8", errors="replace").strip()[-400:]
        status = f"exit status {code}" if code is not None else "closed its output"
        return f"ended unexpectedly ({status})" + (f": {tail}" if tail else "")

    async def call(self, tool: str, args: dict[str, Any], timeout: float) -> Outcome:
        data = (json.dumps({"tool": tool, "input": args}) + "\n").encode()

        def write() -> bool:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
                return True
            except (OSError, ValueError):
                return False

        if not await asyncio.to_thread(write):
            return Outcome("", True, lost=await asyncio.to_thread(self.why_dead))
        try:
            message = await self.receive(timeout)
        except TimeoutError:
            return Outcome("", True, lost=f"did not answer within {timeout:g} s and was killed")
        if message is None:
            return Outcome("", True, lost=await asyncio.to_thread(self.why_dead))
        return Outcome(str(message.get("output", "")), bool(message.get("is_error")),
                       float(message.get("seconds", 0.0)))

    def kill(self) -> None:
        self.sandbox.kill(self.proc)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


class Machine:
    """The episode's tools: a tool process, restarted (state lost) when it dies or hangs."""

    def __init__(self, sandbox: Sandbox, st: Stage, claude_md: str) -> None:
        self.sandbox, self.stage, self.claude_md = sandbox, st, claude_md
        self.process: ToolProcess | None = None

    async def start(self) -> str | None:
        """None when the tool server is up, else why not."""
        loop = asyncio.get_running_loop()
        try:
            self.process = await asyncio.to_thread(ToolProcess, self.sandbox, self.stage, self.claude_md, loop)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"could not be started: {exc}"
        try:
            message = await self.process.receive(START_SECONDS)
        except TimeoutError:
            message = None
        if message is None or not message.get("ready"):
            why = await asyncio.to_thread(self.process.why_dead)
            self.close()
            return why
        return None

    async def call(self, tool: str, args: dict[str, Any]) -> Outcome:
        assert self.process is not None, "start() first"
        timeout = 120.0
        if tool == "Bash":
            ms = args.get("timeout")
            ms = ms if isinstance(ms, int | float) and not isinstance(ms, bool) and ms > 0 else shell.BASH_DEFAULT_MS
            timeout = min(float(ms), shell.BASH_MAX_MS) / 1000
        outcome = await self.process.call(tool, args, timeout + GRACE_SECONDS)
        if outcome.lost is not None:
            self.close()
            problem = await self.start()
            outcome.output = (f"The tool process {outcome.lost}. " + (
                "It was restarted: the shell's working directory, variables and files in /tmp are reset."
                if problem is None else f"It could not be restarted: {problem}"))
        return outcome

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process = None


class StagedCorpus:
    """The corpus staged once and shared by every episode of a run; restaged for another corpus."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._stage: Stage | None = None
        self._key: tuple[Path, Path, bool] | None = None

    async def get(self, corpus: Corpus, model: Path, python: str, jail: bool) -> Stage:
        async with self._lock:
            key = (corpus.root, model, jail)
            if self._stage is None or self._key != key:
                if self._stage is not None:
                    self._stage.cleanup()
                self._stage = await asyncio.to_thread(stage, corpus, model, python, jail)
                self._key = key
            return self._stage

    def __del__(self) -> None:
        if self._stage is not None:
            self._stage.cleanup()
