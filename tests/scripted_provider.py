"""A model provider plugin (`--model tests.scripted_provider:scripted/NAME`): a factory
`(ModelSpec, timeout) -> ChatModel` whose model replies from a script, as a user's in-house
gateway would be wired in. Searches first, then answers with the page the search returned."""

from __future__ import annotations

import json

from deskbench.models.registry import ModelSpec
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, Message, ToolCall, Usage


class ScriptedChat:
    def __init__(self, spec: ModelSpec) -> None:
        self.id = spec.id
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        searched = any(m.role == "tool" for m in request.messages)
        if not searched:
            call = ToolCall(id=f"c{self.calls}", name="search_documents", arguments=json.dumps({"query": "winter rates"}))
        else:
            seen = json.dumps([m.model_dump(mode="json") for m in request.messages])
            answer = ["Mountain car"] if "winter" in seen.lower() else ["nothing seen"]
            call = ToolCall(id=f"c{self.calls}", name="provide_answer", arguments=json.dumps(
                {"answer": answer, "citations": [{"file": "alpha.pdf", "page": 1}]}))
        return ChatResponse(message=Message(role="assistant", tool_calls=[call]), model=self.id,
                            usage=Usage(calls=1, input_tokens=10, output_tokens=5), finish_reason="tool_calls")

    async def aclose(self) -> None:
        return None


def scripted(spec: ModelSpec, timeout: float) -> ChatModel:
    return ScriptedChat(spec)
