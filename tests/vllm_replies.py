"""The replies of a vLLM server to vllm_agent.py, from the official-requests scenario's abstract
replies (tests/data/official_requests/scenario.json and vllm_questions.json), as SimOpenAI
behaviours. The recorder (scripts/official_requests/record_vllm.py) and the test
(tests/tracks/docqa/test_official_requests_vllm.py) answer from the same function, so both sides see the same
replies. Standard library only: the recorder runs in the official scripts' venv.

Abstract reply keys: `text` (the content), `search` (one search_documents call per query),
`answer` (a provide_answer call with that object as its arguments: vllm_agent.py's answer
channel), `calls` ([{name, arguments}]: calls as given, arguments a raw string, after the others),
`status` (the server refuses the request with that status and `message`, scripted).
"""

from __future__ import annotations

import json
from typing import Any

MODEL = "default"
"""The model name process_dataset.py gives VLLMSearchAgent for --provider vllm."""


def vllm_completion(abstract: dict[str, Any], question: str, n: int, model: str = MODEL) -> dict[str, Any]:
    """A chat.completion as vLLM's OpenAI-compatible server answers (ChatCompletionResponse: the
    message's content null beside tool calls, tool_calls [] without; finish_reason "tool_calls"
    when it called a tool; stop_reason, prompt_logprobs and reasoning_content null)."""
    calls = [("search_documents", json.dumps({"query": q}, ensure_ascii=False)) for q in abstract.get("search", [])]
    if "answer" in abstract:
        calls.append(("provide_answer", json.dumps(abstract["answer"], ensure_ascii=False)))
    calls += [(c["name"], c["arguments"]) for c in abstract.get("calls", [])]
    tool_calls = [{"id": f"chatcmpl-tool-{question}-{n}-{i}", "type": "function",
                   "function": {"name": name, "arguments": arguments}} for i, (name, arguments) in enumerate(calls)]
    message = {"role": "assistant", "content": abstract.get("text"), "tool_calls": tool_calls,
               "reasoning_content": None}
    return {
        "id": f"chatcmpl-{question}-{n}", "object": "chat.completion", "created": 1767225600, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if tool_calls else "stop", "stop_reason": None}],
        "usage": {"prompt_tokens": 100, "total_tokens": 110, "completion_tokens": 10, "prompt_tokens_details": None},
        "prompt_logprobs": None,
    }


def vllm_behaviour(abstract: dict[str, Any], question: str, n: int, model: str = MODEL) -> dict[str, Any]:
    """The SimOpenAI behaviour for one abstract reply: a scripted refusal, or the completion."""
    if "status" in abstract:
        return {"kind": "status", "status": abstract["status"], "message": abstract.get("message")}
    return {"kind": "raw", "body": json.dumps(vllm_completion(abstract, question, n, model))}
