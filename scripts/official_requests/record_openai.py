"""Record the requests of the official openai_agent.py (see common.py; a developer tool).

Replies are chat.completion objects shaped as OpenAI's API returns them (message fields role,
content, tool_calls, refusal, annotations; usage with its details), so the SDK's
`beta.chat.completions.parse` handles them as it handles the real ones, and the assistant
message it appends to `messages` is re-serialised as it would be in a real run. Abstract reply
(scenario.json) to message: `text` -> content; `answer` -> content = the Answer JSON (the
structured-output channel); `search` -> one tool call per query, ids call_<question>_<n>_<i>.

Usage: /work/official-venv/bin/python scripts/official_requests/record_openai.py --madqa MADQA
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import common  # noqa: E402


def completion(body: dict[str, Any], abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
    """The chat.completion for one abstract reply."""
    calls = [{"id": f"call_{question}_{n}_{i}", "type": "function",
              "function": {"name": "search_documents", "arguments": json.dumps({"query": q}, ensure_ascii=False)}}
             for i, q in enumerate(abstract.get("search", []))]
    content = abstract.get("text")
    if "answer" in abstract:
        content = json.dumps(abstract["answer"], ensure_ascii=False)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    message |= {"refusal": None, "annotations": []}
    return {
        "id": f"chatcmpl-{question}-{n}", "object": "chat.completion", "created": 1767225600, "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
                  "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
        "service_tier": "default", "system_fingerprint": None,
    }


class OpenAIRecorder:
    script = "openai_agent.py"
    sdk = "openai"
    headers = ("content-type",)

    def make_agent(self, module: Any, engine: Any, base_url: str) -> Any:
        import os

        os.environ["OPENAI_BASE_URL"] = f"{base_url}/v1"  # the SDK reads it; the script passes only api_key
        return module.SearchAgent(engine, api_key="sk-official-recording")  # its default model

    def reply(self, body: Any, abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
        return completion(body, abstract, n, question)


if __name__ == "__main__":
    common.main(OpenAIRecorder(), "openai.json")
