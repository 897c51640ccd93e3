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
from typing import Any

from http_double import LocalJsonServer, Response, ServedDouble

Behaviour = dict[str, Any]
"""{"kind": "text", "text": ...} | {"kind": "tool", "name": ..., "arguments": str}
| {"kind": "status", "status": 429, "retry_after": "0.2"} | {"kind": "slow", "seconds": 2.0, ...}
| {"kind": "raw", "body": "<html>...", "content_type": "text/html"}
Optional on text/tool: "reasoning_content" and/or "reasoning" (the message fields DeepSeek/vLLM/
llama.cpp and OpenRouter put reasoning text in), "reasoning_tokens" (usage.completion_tokens_details)."""


@dataclass
class FakeOpenAI(ServedDouble):
    script: Callable[[dict[str, Any], int], Behaviour] = lambda body, n: {"kind": "text", "text": "ok"}
    latency: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: LocalJsonServer | None = None

    @property
    def base_url(self) -> str:
        return f"{self._url}/v1"

    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> Response:
        body = json.loads(raw or b"{}")  # not JSON: raises, and the connection is dropped unanswered
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            n = len(self.requests)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return self._answer(body, n)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, body: dict[str, Any], n: int) -> Response:
        behaviour = self.script(body, n)
        if self.latency:
            time.sleep(self.latency)
        if behaviour["kind"] == "slow":
            time.sleep(behaviour["seconds"])
            behaviour = behaviour.get("then", {"kind": "text", "text": "late"})
        if behaviour["kind"] == "raw":  # garbage on purpose: an HTML page, a wrong-shaped body
            return (behaviour.get("status", 200),
                    [("Content-Type", behaviour.get("content_type", "application/json"))], behaviour["body"].encode())
        if behaviour["kind"] == "status":
            payload = json.dumps({"error": {"message": behaviour.get("message", "injected failure"),
                                            "type": "server_error"}}).encode()
            retry = [("Retry-After", str(behaviour["retry_after"]))] if "retry_after" in behaviour else []
            return behaviour["status"], [*retry, ("Content-Type", "application/json")], payload
        return 200, [("Content-Type", "application/json")], completion_payload(behaviour, n, body.get("model", "fake"))


def completion_payload(behaviour: Behaviour, n: int, model: str) -> bytes:
    """A chat.completion body for a "text" or "tool" behaviour."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if behaviour["kind"] == "tool":
        message["tool_calls"] = [{"id": behaviour.get("id", f"call_{n}"), "type": "function",
                                  "function": {"name": behaviour["name"], "arguments": behaviour["arguments"]}}]
        finish = "tool_calls"
    else:
        message["content"] = behaviour["text"]
    for name in ("reasoning_content", "reasoning"):
        if name in behaviour:
            message[name] = behaviour[name]
    usage: dict[str, Any] = {"prompt_tokens": behaviour.get("prompt_tokens", 100),
                             "completion_tokens": behaviour.get("completion_tokens", 20), "total_tokens": 120}
    if "reasoning_tokens" in behaviour:
        usage["completion_tokens_details"] = {"reasoning_tokens": behaviour["reasoning_tokens"]}
    return json.dumps({
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
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
