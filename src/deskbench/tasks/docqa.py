"""docqa formats: task, submission, trajectory step, per-item score (DESIGN.md "Formats").

The official MADQA dataset rows and predictions files are accepted as they are: citations may
say `file` or `document`, answers may be a string or a list, effort may come as `iterations`
or `search_history`. Numeric page strings ("7") are coerced to ints and counted, unless the
reader is told to behave like the official script (context {"coerce_pages": False}).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

from deskbench.tasks.jsonl import ReadResult, read_jsonl

HopType = Literal["single", "cross_page", "cross_doc"]
EffortMeasure = Literal["steps", "tokens", "seconds"]
HOP_TYPES: tuple[HopType, ...] = ("single", "cross_page", "cross_doc")


class Evidence(BaseModel):
    """One gold evidence page; pages are 1-based everywhere."""

    model_config = ConfigDict(extra="ignore")
    document: str = Field(validation_alias=AliasChoices("document", "file", "doc"))
    page: int = Field(ge=1)


def _id_as_text(v: Any) -> Any:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


ItemId = Annotated[str, BeforeValidator(_id_as_text)]
"""Task ids are strings ("dev/0"); a bare number in a file is read as its text."""


class Injection(BaseModel):
    """A planted prompt injection on one of a generated task's pages (deskbench's injection
    track): the answer it tries to force, so a run can be checked for following it."""

    kind: Literal["visible_text", "hidden_text", "table_cell"]
    document: str
    page: int = Field(ge=1)
    instruction: str
    target_answer: str


class DocQATask(BaseModel):
    """A MADQA question with its acceptable answers and minimal evidence set."""

    model_config = ConfigDict(extra="allow")
    id: ItemId
    question: str
    answer_variants: list[list[str]] = Field(min_length=1)
    evidence: list[Evidence] = Field(default_factory=list)
    domain: str | None = None
    document_category: str | None = Field(
        default=None, validation_alias=AliasChoices("document_category", "category")
    )
    injection: Injection | None = None  # generated injection-track tasks only

    @field_validator("answer_variants", mode="before")
    @classmethod
    def _variants(cls, v: Any) -> Any:
        """A flat list of strings means one-item alternatives: ["a", "b"] -> [["a"], ["b"]]."""
        if isinstance(v, str):
            return [[v]]
        if isinstance(v, list):
            return [[x] if isinstance(x, str) else x for x in v]
        return v

    @property
    def hop_type(self) -> HopType:
        return hop_type(self.evidence)


def hop_type(evidence: list[Evidence]) -> HopType:
    """Evidence in more than one document -> cross_doc; else more than one page -> cross_page."""
    if len({e.document for e in evidence}) > 1:
        return "cross_doc"
    if len({(e.document, e.page) for e in evidence}) > 1:
        return "cross_page"
    return "single"


class Citation(BaseModel):
    """A cited page. `page` stays a string only in official mode (then it matches nothing)."""

    model_config = ConfigDict(extra="ignore")
    document: str = Field(validation_alias=AliasChoices("document", "file", "doc"))
    page: int | str

    @field_validator("page", mode="before")
    @classmethod
    def _coerce_page(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, bool):
            raise ValueError("page must be a page number, not true/false")
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            text = v.strip()
            if not text.isdigit():
                raise ValueError(f"page {v!r} is not a page number")
            ctx = info.context or {}
            if not ctx.get("coerce_pages", True):
                return v
            counter = ctx.get("coerced")
            if isinstance(counter, list):
                counter.append(v)
            return int(text)
        return v


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


class DocQASubmission(BaseModel):
    """One system's answer to one task (the official MADQA predictions format, or deskbench's)."""

    model_config = ConfigDict(extra="allow")
    id: ItemId
    question: str | None = None
    answer: list[str]
    citations: list[Citation] = Field(default_factory=list)
    search_history: list[str] | None = None
    iterations: int | None = Field(default=None, ge=0)
    steps: int | None = Field(default=None, ge=0)
    usage: Usage | None = None
    trajectory: list[TrajectoryStep] | None = None

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_list(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str | int | float) and not isinstance(v, bool):
            return [str(v)]
        if isinstance(v, list):
            return [str(x) if isinstance(x, int | float) and not isinstance(x, bool) else x for x in v]
        return v

    def effort(self, measure: EffortMeasure = "steps") -> float | None:
        """Effort for calibration: steps (tool calls) by default; tokens or seconds if reported."""
        if measure == "tokens":
            return float(self.usage.input_tokens + self.usage.output_tokens) if self.usage else None
        if measure == "seconds":
            return self.usage.seconds if self.usage else None
        if self.steps is not None:
            return float(self.steps)
        if self.iterations is not None:
            return float(self.iterations)
        if self.search_history is not None:
            return float(len(self.search_history))
        if self.trajectory is not None:
            return float(sum(isinstance(s, ToolCallStep) for s in self.trajectory))
        return None


ScoreStatus = Literal["scored", "unscored", "missing"]


@dataclass(frozen=True, slots=True)
class ItemScore:
    """Everything known about one task after scoring; written to disk and re-analysed later.

    A plain dataclass, not a pydantic model: scoring makes one per task and pydantic's
    construction cost more than the scoring. pydantic still validates it when read from disk
    (`TypeAdapter(ItemScore)`).
    """

    id: str
    status: ScoreStatus
    hop_type: HopType
    domain: str | None = None
    category: str | None = None
    accuracy: float | None = None  # 1 / 0.5 / 0; None when unscored
    accuracy_source: Literal["anls", "exact", "judge", "missing", "none"] = "anls"
    anls: float = 0.0
    exact: bool = False
    page_f1: float = 0.0
    doc_f1: float = 0.0
    effort: float | None = None
    judge_verdict: str | None = None
    judge_error: str | None = None
    injected: bool = False  # a prompt injection sits on one of the task's pages (injection track)
    followed_injection: bool = False  # ... and the answer is the one it tried to force


def read_tasks(path: Path, *, skip_invalid: bool = False) -> ReadResult[DocQATask]:
    return read_jsonl(path, DocQATask, skip_invalid=skip_invalid)


def read_submissions(
    path: Path, *, coerce_pages: bool = True, skip_invalid: bool = False
) -> tuple[ReadResult[DocQASubmission], int]:
    """Submissions, and how many citation pages were given as numeric strings and coerced."""
    coerced: list[str] = []
    result = read_jsonl(
        path,
        DocQASubmission,
        skip_invalid=skip_invalid,
        context={"coerce_pages": coerce_pages, "coerced": coerced},
    )
    return result, len(coerced)
