"""What an episode did, step by step, in every track: model calls, tool calls, page views,
citations and the answer (`Episode.trajectory`), and the page citation they share. Moved out of
docqa's formats because analytics and deliverables agents write the same steps."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)


class Citation(BaseModel):
    """A cited page. `page` is a string or None only in official mode (see tracks/docqa/tasks.py's module docstring: official mode)."""

    model_config = ConfigDict(extra="ignore")
    # The official evaluator reads `file` before `document`.
    document: str = Field(validation_alias=AliasChoices("file", "document", "doc"))
    page: int | str | None = None

    @field_validator("page", mode="before")
    @classmethod
    def _coerce_page(cls, v: Any, info: ValidationInfo) -> Any:
        ctx = info.context or {}
        if ctx.get("official"):  # as written: 2.0 == 2 in Python, so the evaluator matches it; "2" matches nothing
            if isinstance(v, float) and v.is_integer():
                return int(v)
            return v if v is None or isinstance(v, int | str) else str(v)
        if isinstance(v, bool):
            raise ValueError("page must be a page number, not true/false")
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            text = v.strip()
            if not text.isdigit():
                raise ValueError(f"page {v!r} is not a page number")
            counter = ctx.get("coerced")
            if isinstance(counter, list):
                counter.append(v)
            return int(text)
        return v

    @model_validator(mode="after")
    def _page_needed(self, info: ValidationInfo) -> Citation:
        if self.page is None and not (info.context or {}).get("official"):
            raise ValueError("citation has no page")
        return self


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow")
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: unknown (a model without a price)
    seconds: float = 0.0


class Step(BaseModel):
    """What every trajectory step has: `at`, the ISO-8601 UTC time the step ended, written as
    `deskbench.runs.store.now()` writes it (MADQA Appendix C.2 logs a timestamp with every search
    and page view). None on steps stored before steps were timed: an old run loads as it was,
    and no time is made up for it."""

    at: str | None = None
    # the order steps ended in this process (`mark_ended`): `at` is to the millisecond, and a call
    # and a step can end in the same one; never stored
    _ended: int | None = PrivateAttr(default=None)

    def mark_ended(self) -> None:
        self._ended = next(_ENDED)

    @property
    def ended(self) -> int | None:
        return self._ended


_ENDED = itertools.count()


class ModelCallStep(Step):
    kind: Literal["model_call"] = "model_call"
    messages_hash: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    # None: unknown, the model had no price. Steps stored before then read 0.0 for an unknown
    # cost; an episode whose usage says its cost is unknown loads them as None (runs/store.py).
    cost_usd: float | None = 0.0


class ToolCallStep(Step):
    kind: Literal["tool_call"] = "tool_call"
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)  # a summary, e.g. {"pages": [["a.pdf", 3]]}
    seconds: float = 0.0


class PageViewStep(Step):
    """A human (or agent) opened a page outside a search result."""

    kind: Literal["page_view"] = "page_view"
    document: str
    page: int
    seconds: float = 0.0


class CitationStep(Step):
    kind: Literal["citation_added", "citation_removed"] = "citation_added"
    document: str
    page: int


class AnswerStep(Step):
    kind: Literal["answer"] = "answer"
    answer: list[str]
    citations: list[Citation] = Field(default_factory=list)


TrajectoryStep = Annotated[
    ModelCallStep | ToolCallStep | PageViewStep | CitationStep | AnswerStep,
    Field(discriminator="kind"),
]
