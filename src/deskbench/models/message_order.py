"""A conversation in the role order an API that refuses a user message right after tool results takes.

Mistral's API validates the order of roles (mistral-common's MistralRequestValidator, as the
hosted API answers it: 400 "Unexpected role 'user' after role 'tool'", type
invalid_request_message_order, code 3230; and "Unexpected role 'tool' after role 'user'"). After
a tool result only an assistant message or another tool result may come. Agents that show what a
search found as a user message after the tool result (MADQA's official scripts do, one image
message per call, interleaved with the results) would be refused on every call after their first
search. For a model whose capabilities say `user_after_tool = false` the adapter sends instead:

1. the results of one assistant turn's calls together, right after it, in the order of the calls;
2. the other messages of that turn after them, in their order;
3. between the last result and a following non-tool message, an assistant turn with the text
   BRIDGE: the API's only way from a tool result to a user message.

Nothing is dropped and no text is changed; the stored conversation keeps its own order (this is
the wire form only), and a conversation already in this order is returned as it is (the same list).
"""

from __future__ import annotations

from deskbench.models.types import Message

BRIDGE = "OK."
"""The assistant turn between tool results and the next user message (content, so that Mistral's
"Assistant message must have either content or tool_calls, but not none." is not met)."""

_BRIDGE_MESSAGE = Message(role="assistant", content=BRIDGE)


def tool_results_first(messages: list[Message]) -> list[Message]:
    """`messages` with each assistant turn's tool results right after it and an assistant BRIDGE
    turn between tool results and a following user (or system) message."""
    if not _needs_order(messages):
        return messages
    out: list[Message] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        out.append(message)
        i += 1
        if message.role != "assistant" or not message.tool_calls:
            continue
        end = i
        while end < n and messages[end].role != "assistant":
            end += 1
        turn = messages[i:end]
        results = [m for m in turn if m.role == "tool"]
        others = [m for m in turn if m.role != "tool"]
        out.extend(results)
        if results and others:
            out.append(_BRIDGE_MESSAGE)
        out.extend(others)
        i = end
    return out


def _needs_order(messages: list[Message]) -> bool:
    """Whether any tool result is followed by a message other than a tool result or an assistant
    turn, or follows one that is neither an assistant turn nor a tool result."""
    previous = None
    for message in messages:
        if previous == "tool" and message.role not in ("tool", "assistant"):
            return True
        if message.role == "tool" and previous not in ("tool", "assistant"):
            return True
        previous = message.role
    return False
