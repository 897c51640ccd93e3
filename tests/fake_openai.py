"""A small local HTTP server speaking the OpenAI chat API, for fault injection only.

It answers from a script: plain replies or tool calls, and on request 429 with Retry-After,
500, answers slower than the client's timeout, or malformed tool-call arguments. The real model
on the wire in the tests is the llama.cpp server; this one exists to break things on purpose.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = dict[str, Any]
"""{"kind": "text", "text": ...} | {"kind": "tool", "name": ..., "arguments": str}
| {"kind": "status", "status": 429, "retry_after": "0.2"} | {"kind": "slow", "seconds": 2.0, ...}
| {"kind": "raw", "body": "<html>...", "content_type": "text/html"}"""


@dataclass
class FakeOpenAI:
    script: Callable[[dict[str, Any], int], Behaviour] = lambda body, n: {"kind": "text", "text": "ok"}
    latency: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every response.
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    n = len(fake.requests)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    fake._answer(self, body, n)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # the default backlog of 5 drops connections under load

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], n: int) -> None:
        behaviour = self.script(body, n)
        if self.latency:
            time.sleep(self.latency)
        if behaviour["kind"] == "slow":
            time.sleep(behaviour["seconds"])
            behaviour = behaviour.get("then", {"kind": "text", "text": "late"})
        if behaviour["kind"] == "raw":  # garbage on purpose: an HTML page, a wrong-shaped body
            raw = behaviour["body"].encode()
            handler.send_response(behaviour.get("status", 200))
            handler.send_header("Content-Type", behaviour.get("content_type", "application/json"))
            handler.send_header("Content-Length", str(len(raw)))
            handler.end_headers()
            handler.wfile.write(raw)
            return
        if behaviour["kind"] == "status":
            payload = json.dumps({"error": {"message": behaviour.get("message", "injected failure"),
                                            "type": "server_error"}}).encode()
            handler.send_response(behaviour["status"])
            if "retry_after" in behaviour:
                handler.send_header("Retry-After", str(behaviour["retry_after"]))
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        payload = completion_payload(behaviour, n, body.get("model", "fake"))
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


def completion_payload(behaviour: Behaviour, n: int, model: str) -> bytes:
    """A chat.completion body for a "text" or "tool" behaviour."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if behaviour["kind"] == "tool":
        message["tool_calls"] = [{"id": f"call_{n}", "type": "function",
                                  "function": {"name": behaviour["name"], "arguments": behaviour["arguments"]}}]
        finish = "tool_calls"
    else:
        message["content"] = behaviour["text"]
    return json.dumps({
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": behaviour.get("prompt_tokens", 100),
                  "completion_tokens": behaviour.get("completion_tokens", 20), "total_tokens": 120},
    }).encode()


async def serve_async(script: Callable[[dict[str, Any], int], Behaviour], latency: float,
                      ready: Callable[[str], None], stop: asyncio.Event, counter: list[int]) -> None:
    """A lean asyncio server for the runtime benchmark: text and tool behaviours only, one event
    loop, keep-alive. The threaded FakeOpenAI spends ~1 ms of CPU per request in http.server and
    a thread per connection; here the fake model must cost next to nothing, so that what the
    benchmark measures is the harness."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = json.loads(await reader.readexactly(length)) if length else {}
                counter[0] += 1
                n = counter[0]
                behaviour = script(body, n)
                await asyncio.sleep(latency)
                payload = completion_payload(behaviour, n, body.get("model", "fake"))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(payload)).encode() + b"\r\n\r\n" + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    ready(f"http://127.0.0.1:{port}/v1")
    async with server:
        await stop.wait()
