"""MADQA's three-way LLM judge behind the AnswerJudge protocol: the official template.

The prompt and the `submit_judgment` tool are the official evaluator's (github OxRML/MADQA,
eval/metrics.py `_GEVAL_PROMPT_TEMPLATE`, `_LLM_JUDGE_TOOL`, commit 978fa76), which the paper's
Prompt 4 shortens: its steps, its examples, and the `main_issue` field. As there, the predicted
answer is `json.dumps` of the answer as submitted (a string stays a string, so the rule on
comma-separated strings can fire) and the gold variants are `json.dumps` of the list of lists; JSON
escaping also keeps an answer's quotes and newlines inside its one data line. The model must call
`submit_judgment`; the arguments are validated against the tool's schema. A call that fails after
the model wrapper's retries, or never yields a valid judgment, is "unscored" (the scorer turns that
into 0 in --official mode, as the official evaluator does).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from deskbench.models.types import ChatModel, ChatRequest, Message, ModelError, ToolSpec
from deskbench.scoring.judge_log import DOCQA_JUDGE, recorded
from deskbench.tracks.docqa.scoring.judge import Judgement

PROMPT = """You are evaluating answer correctness for a Document QA benchmark.

## Input
Question: {question}
Predicted Answer: {predicted}
Gold Answer Variants: {gold_variants}

## Evaluation Criteria

**correct**: Predicted answer is semantically equivalent to at least one gold variant. Minor format differences are acceptable.

**partial**: Predicted answer contains correct core information but has a significant format issue (e.g., list presented as comma-separated string when items are short/atomic) OR includes irrelevant additions.

**incorrect**: Predicted answer is factually wrong, missing, contains different information, or fails to answer the question type (e.g., no Yes/No for binary questions). Missing unit qualifiers that change magnitude (thousands, millions) are incorrect.

## Evaluation Steps

Follow these steps in order:

Step 1 - Check for refusal: Does the answer refuse or claim inability to answer? If yes → incorrect.

Step 2 - Compare content: Does the predicted answer match the core meaning of any gold variant? If content is wrong or different → incorrect.

Step 3 - Check critical errors (any of these → incorrect):
- Missing scale qualifiers that change magnitude: "50" vs "$50 million" → incorrect
- Binary questions without explicit Yes/No: Q: "Is X true?" A: "X is observed" → incorrect (must say Yes or No)
- Wrong entity/value: different person, company, number than gold → incorrect
- Partial list with wrong items mixed in: some correct + some wrong items → incorrect

Step 4 - Check format (only if content is correct):
- If gold expects multiple items AND predicted is a comma-separated string (not a list) → partial
- If gold expects single item → no format issue possible

Step 5 - Check verbosity (only if content is correct):
- CORRECT (acceptable verbosity):
  * Extra qualifiers: "three security questions" when gold is "3" → correct
  * Relevant context: "No — Massachusetts; Washington" for "same state?" question → correct
  * Clarifying phrases: "in his personal capacity", "per annum" → correct
- PARTIAL (medium verbosity) - ONLY when additions are truly irrelevant:
  * Adding unrequested details to list items
  * Over-specific precision: date+time when only date asked → partial
- INCORRECT (high verbosity):
  * Multi-sentence responses when a word/phrase suffices
  * Full paragraphs of explanation
  * Conversational preambles: "Based on the document...", "The answer is..."

Based on your step-by-step analysis, provide your final judgment.

After your reasoning, you MUST call submit_judgment with your final decision."""

MAIN_ISSUES = ("none", "refusal", "wrong_content", "missing_unit", "no_yes_no", "list_format",
               "verbosity_medium", "verbosity_high")
MainIssue = Literal["none", "refusal", "wrong_content", "missing_unit", "no_yes_no", "list_format",
                    "verbosity_medium", "verbosity_high"]


class JudgmentArgs(BaseModel):
    judgment: Literal["correct", "partial", "incorrect"]
    main_issue: MainIssue
    explanation: str


SUBMIT_JUDGMENT = ToolSpec(
    name="submit_judgment",
    description="Submit your final judgment after reasoning through the evaluation steps",
    parameters={
        "type": "object",
        "properties": {
            "judgment": {"type": "string", "enum": ["correct", "partial", "incorrect"],
                         "description": "Final judgment: correct, partial, or incorrect"},
            "main_issue": {"type": "string", "enum": list(MAIN_ISSUES),
                           "description": "The primary issue found, if any"},
            "explanation": {"type": "string", "description": "Brief explanation of your judgment"},
        },
        "required": ["judgment", "main_issue", "explanation"],
    },
)


def judge_prompt(question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]) -> str:
    """The official prompt; `predicted` as submitted (a string or a list)."""
    return PROMPT.format(
        question=question,
        predicted=json.dumps(predicted if isinstance(predicted, str) else list(predicted)),
        gold_variants=json.dumps([list(v) for v in variants]),
    )


class LLMJudge:
    """Any chat model as the judge; wrap it in ResilientModel (with a cache) for retries."""

    def __init__(self, model: ChatModel, *, repairs: int = 1) -> None:
        self.model = model
        self.name = f"llm-judge/{model.id}"
        self.repairs = repairs

    async def aclose(self) -> None:
        """Close the model's connections (they belong to the event loop that judged)."""
        await self.model.aclose()

    async def judge(
        self, question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]
    ) -> Judgement:
        messages = [Message(role="user", content=judge_prompt(question, predicted, variants))]
        model = recorded(self.model, DOCQA_JUDGE)  # kept with the episode when `score` records
        problem = ""
        for _ in range(1 + self.repairs):
            request = ChatRequest(messages=messages, tools=[SUBMIT_JUDGMENT], tool_choice="submit_judgment")
            try:
                response = await model.complete(request)
            except ModelError as exc:
                return Judgement("unscored", error=str(exc))
            calls = [c for c in response.message.tool_calls if c.name == SUBMIT_JUDGMENT.name]
            try:
                if not calls:
                    raise ValueError("no submit_judgment call in the reply")
                args = JudgmentArgs.model_validate(calls[0].parsed())
            except (ValueError, ValidationError) as exc:
                problem = str(exc).splitlines()[0]
                messages = messages + [
                    response.message,
                    *[Message(role="tool", tool_call_id=c.id, content="invalid") for c in response.message.tool_calls],
                    Message(role="user", content=f"That was not a valid judgment ({problem}). Call submit_judgment "
                                                 'with {"judgment": "correct" | "partial" | "incorrect", "main_issue": '
                                                 f'one of {", ".join(MAIN_ISSUES)}, "explanation": "..."}}.'),
                ]
                continue
            return Judgement(args.judgment, reasoning=args.explanation, main_issue=args.main_issue)
        return Judgement("unscored", error=f"no valid judgment after {1 + self.repairs} tries: {problem}")


def make_judge(spec: str, cache_path: Path | None, no_cache: bool, concurrency: int) -> LLMJudge:
    """docqa's judge behind --judge: the core's judge model (scoring/judges.py), its response
    cache at `cache_path` (default: the shared one) unless `no_cache`."""
    from deskbench.scoring.judges import open_judge

    model = open_judge(spec, concurrency, cache=False if no_cache else (cache_path or True))
    assert model is not None  # spec is given
    return LLMJudge(model)
