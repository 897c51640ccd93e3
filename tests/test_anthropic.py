"""The Anthropic adapter on the wire, against a local server speaking the Messages API."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from PIL import Image

from deskbench.models.anthropic_chat import MAX_IMAGE_BYTES, AnthropicChat
from deskbench.models.resilient import ResilientModel, RetryPolicy
from deskbench.models.types import ChatRequest, ImagePart, Message, TextPart, ToolCall, ToolSpec


class FakeAnthropic:
    def __init__(self, replies: list[tuple[int, dict[str, Any]]]) -> None:
        self.replies, self.bodies = replies, []

    def __enter__(self) -> FakeAnthropic:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                fake.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                status, payload = fake.replies[min(len(fake.bodies), len(fake.replies)) - 1]
                data = json.dumps(payload).encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("retry-after", "0.05")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *a: object) -> None:
        self.server.shutdown()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def message(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": list(blocks),
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 50, "output_tokens": 7}}


def test_requests_responses_images_and_retries() -> None:
    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (1500, 1500, 3), dtype=np.uint8))
    buf = io.BytesIO()
    noise.save(buf, format="PNG")
    assert len(buf.getvalue()) > MAX_IMAGE_BYTES
    tool = ToolSpec(name="search_documents", description="search", parameters={"type": "object"})
    first = ChatRequest(
        messages=[Message(role="system", content="be brief"),
                  Message(role="user", content=[TextPart(text="look"), ImagePart.of(buf.getvalue())])],
        tools=[tool], tool_choice="search_documents",
    )
    replies = [
        (429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        (200, message({"type": "tool_use", "id": "tu_1", "name": "search_documents", "input": {"query": "x"}})),
        (200, message({"type": "tool_use", "id": "tu_2", "name": "respond", "input": {"answer": ["42"]}})),
    ]
    with FakeAnthropic(replies) as fake:
        model = ResilientModel(AnthropicChat("claude-test", base_url=fake.url, api_key="k"),
                               policy=RetryPolicy(attempts=3, base_delay=0.01, timeout=10))

        async def go() -> tuple:
            a = await model.complete(first)
            follow = ChatRequest(messages=[*first.messages, a.message,
                                           Message(role="tool", tool_call_id="tu_1", content="no results")],
                                 response_schema={"type": "object"})
            return a, await model.complete(follow)

        a, b = asyncio.run(go())
    assert model.ledger.retries == 1
    assert a.message.tool_calls == [ToolCall(id="tu_1", name="search_documents", arguments='{"query": "x"}')]
    assert a.usage.input_tokens == 50
    sent = fake.bodies[1]
    assert sent["system"] == "be brief" and sent["tool_choice"] == {"type": "tool", "name": "search_documents"}
    image = sent["messages"][0]["content"][1]
    import base64

    assert image["type"] == "image" and len(base64.b64decode(image["source"]["data"])) <= MAX_IMAGE_BYTES
    assert json.loads(b.message.text()) == {"answer": ["42"]}  # structured output via the respond tool
    roles = [m["role"] for m in fake.bodies[2]["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert fake.bodies[2]["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "tu_1",
                                                          "content": "no results"}
    assert fake.bodies[2]["tool_choice"] == {"type": "tool", "name": "respond"}
