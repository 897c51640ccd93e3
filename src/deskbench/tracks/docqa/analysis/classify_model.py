"""MADQA Prompt 2 (Appendix E.2): a chat model classifies each question as yes_no, binary_choice or
other, with its gold answer in view. The verdict comes through a forced `submit_class` call
validated against an enum; a question whose call fails is classified by the deterministic
patterns instead, and counted, so a flaky model never silently changes the result."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from deskbench.errors import is_one_of
from deskbench.models.types import ChatModel, ChatRequest, Message, ModelError, ToolSpec
from deskbench.tracks.docqa.analysis.question_class import CLASSES, QuestionClass, classify_question
from deskbench.tracks.docqa.tasks import DocQATask

PROMPT_2 = """You are classifying questions for an analysis of answer guessability.

Categories
Classify each question into ONE of these categories:

1. "yes_no" - Questions that have Yes or No as the answer.
 - Examples: "Does X offer Y?", "Is X greater than Y?", "Did X happen?"
2. "binary_choice" - Questions asking to choose between exactly 2 options mentioned in the question.
 - Examples: "Which is larger: A or B?", "Is it X or Y?", "Did they choose option A or option B?"
 - Note: The two options must be explicitly stated in the question text.
3. "other" - Everything else.
 - Questions about specific facts, names, dates, numbers, values.
 - Questions about people, organizations, locations.
 - Questions asking "who", "what", "when", "where", "how many", etc.
 - Any question that would require looking up specific information.

Thinking Process
Think step by step:

1. Does the answer have to be Yes or No? -> "yes_no"
2. Does the question explicitly list 2 choices to pick from? -> "binary_choice"
3. Otherwise -> "other"

Input Task
Question: {question}

Gold answer: {answer}

Classify this question:"""

SUBMIT_CLASS = ToolSpec(
    name="submit_class",
    description="Submit the question's category.",
    parameters={"type": "object", "properties": {"category": {"type": "string", "enum": list(CLASSES)}},
                "required": ["category"]},
)


async def classify_one(model: ChatModel, task: DocQATask) -> QuestionClass | None:
    """The model's class for one question, or None when it gave no valid one."""
    answer = " | ".join(", ".join(v) for v in task.answer_variants)
    prompt = PROMPT_2.format(question=json.dumps(task.question, ensure_ascii=False),
                             answer=json.dumps(answer, ensure_ascii=False))
    try:
        response = await model.complete(ChatRequest(messages=[Message(role="user", content=prompt)],
                                                    tools=[SUBMIT_CLASS], tool_choice=SUBMIT_CLASS.name))
    except ModelError:
        return None
    for call in response.message.tool_calls:
        try:
            category = call.parsed().get("category")
        except ValueError:
            continue
        if call.name == SUBMIT_CLASS.name and isinstance(category, str) and is_one_of(category, CLASSES):
            return category
    return None


async def classify_all(model: ChatModel, tasks: Sequence[DocQATask]) -> tuple[dict[str, QuestionClass], list[str]]:
    """Classes for every task, and the ids that fell back to the patterns."""
    try:
        found = await asyncio.gather(*(classify_one(model, t) for t in tasks))
    finally:
        await model.aclose()
    classes: dict[str, QuestionClass] = {}
    fallback: list[str] = []
    for task, cls in zip(tasks, found, strict=True):
        if cls is None:
            fallback.append(task.id)
            cls = classify_question(task.question, task.answer_variants)
        classes[task.id] = cls
    return classes, fallback
