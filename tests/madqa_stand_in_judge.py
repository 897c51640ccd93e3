"""The judge the MADQA parity fixtures were computed with, as a model plugin:
`--judge tests.madqa_stand_in_judge:verdicts/sha256`.

It reads the question and the predicted answer from the official judge prompt deskbench sends and
answers with the verdict `_verdict` of tests/data/madqa_parity/generate.py gives them: the function
that replaced the official evaluator's `_call_llm_judge` (no Gemini) when the official numbers were
computed (sha256 of [question, predicted] -> correct / partial / incorrect / a failed call). Its
"error" is a failed call here too (non-retryable), which --official scores 0 as the official does."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from deskbench.models.registry import ModelSpec
from deskbench.models.types import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    Message,
    ModelError,
    ToolCall,
    Usage,
)

PARITY_GENERATOR = Path(__file__).parent / "data" / "madqa_parity" / "generate.py"


def _verdict_function() -> Any:
    spec = importlib.util.spec_from_file_location("madqa_parity_generate", PARITY_GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._verdict


verdict = _verdict_function()


def shown(prompt: str) -> tuple[str, Any]:
    """(question, predicted answer) as the judge prompt carries them."""
    question = re.search(r"^Question: (.*)$", prompt, re.M)
    predicted = re.search(r"^Predicted Answer: (.*)$", prompt, re.M)
    assert question is not None and predicted is not None, "not the MADQA judge prompt"
    return question.group(1), json.loads(predicted.group(1))


class StandInJudge:
    def __init__(self, spec: ModelSpec) -> None:
        self.id = spec.id

    async def complete(self, request: ChatRequest) -> ChatResponse:
        said = verdict(*shown(request.messages[0].text()))
        if said == "error":
            raise ModelError("stand-in judge: scripted failure", retryable=False)
        call = ToolCall(id="judge-0", name="submit_judgment",
                        arguments=json.dumps({"judgment": said, "main_issue": "none", "explanation": "scripted"}))
        return ChatResponse(message=Message(role="assistant", tool_calls=[call]), model=self.id,
                            usage=Usage(calls=1), finish_reason="tool_calls")

    async def aclose(self) -> None:
        return None


def verdicts(spec: ModelSpec, timeout: float) -> ChatModel:
    return StandInJudge(spec)
