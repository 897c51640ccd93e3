"""A small agent running as an HTTP service (`deskbench run --agent external --url`), built outside
deskbench: http.server on 127.0.0.1 in a thread of the test, and the official `mcp` client
library against the mcp_url each POST names (no deskbench import). It searches with the
question's words, reads the top page as text and answers with the word after "is", citing it.

Modes: "answer" answers before acknowledging (200), "ack" acknowledges at once (202) and answers
from another thread, "fail" answers 500 with a long body and never calls a tool."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAIL_BODY = "internal trouble: " + "x" * 1000  # longer than the 300 characters an error keeps


async def answer(question: str, mcp_url: str) -> None:
    # the SDK imported here, when a service answers: importing this module (for its Handler) costs
    # a test module nothing at collection
    from mcp import ClientSession

    from tests.mcp_client import streamablehttp_client

    async with streamablehttp_client(mcp_url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        words = " OR ".join(w for w in re.findall(r"\w+", question) if len(w) > 3)
        found = await session.call_tool("search_documents", {"query": words})
        top = json.loads(found.content[0].text)["results"][0]  # type: ignore[union-attr]
        page = await session.call_tool("get_page", {"file": top["file"], "page": top["page"], "view": "text"})
        text = " ".join(c.text for c in page.content if c.type == "text")  # type: ignore[union-attr]
        match = re.search(r"\bis ([\w-]+)", text.split("\n", 1)[-1])
        await session.call_tool("provide_answer", {"answer": [match.group(1) if match else "unknown"],
                                                   "citations": [{"file": top["file"], "page": top["page"]}]})


class Service(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = mode
        self.requests: list[dict[str, object]] = []
        self.errors: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/episode"


class Handler(BaseHTTPRequestHandler):
    server: Service

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return None

    def _reply(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(request)
        mode = self.server.mode
        if mode == "fail":
            self._reply(500, FAIL_BODY)
            return
        work = lambda: self._answer(request)  # noqa: E731
        if mode == "ack":
            threading.Thread(target=work, daemon=True).start()
            self._reply(202, "accepted")
            return
        work()
        self._reply(200, "done")

    def _answer(self, request: dict[str, object]) -> None:
        try:
            asyncio.run(answer(str(request["question"]), str(request["mcp_url"])))
        except Exception as exc:  # seen by the test, not lost in a thread
            self.server.errors.append(f"{type(exc).__name__}: {exc}")


@contextmanager
def service(mode: str) -> Iterator[Service]:
    server = Service(mode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
