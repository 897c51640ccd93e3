"""The answer-judge hook: a protocol the LLM judge implements, and its verdicts.

Exact ANLS* = 1 never reaches the judge. A judge that cannot decide (an API failure after
retries, an output that does not validate) returns "unscored": the item is left out of the
accuracy denominator and counted, never scored as wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Verdict = Literal["correct", "partial", "incorrect", "unscored"]

VERDICT_SCORE: dict[Verdict, float | None] = {
    "correct": 1.0,
    "partial": 0.5,
    "incorrect": 0.0,
    "unscored": None,
}


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reasoning: str = ""
    error: str | None = None  # why the verdict is "unscored"
    main_issue: str | None = None  # the official judge's primary issue ("none", "wrong_content", ...)

    @property
    def score(self) -> float | None:
        return VERDICT_SCORE[self.verdict]


class AnswerJudge(Protocol):
    """Decides whether a predicted answer matches any gold variant (MADQA Prompt 4).

    Async, because a judge is usually a model behind an API and a run judges hundreds of answers
    at once; the scorer gathers the calls and the model wrapper limits their concurrency."""

    name: str

    async def judge(
        self, question: str, predicted: str | Sequence[str], variants: Sequence[Sequence[str]]
    ) -> Judgement:
        """`predicted` is the answer as submitted: a string answer stays a string."""
        ...
