"""docqa formats: task, submission, trajectory step, per-item score (docs/design.md).

The official MADQA dataset rows and predictions files are accepted as they are, in every shape the
official agents write and the official evaluator (github OxRML/MADQA, eval/evaluate.py) reads:
citations may say `file` or `document`; answers may be a string, a list (null or numeric items
read as text, as the evaluator's `str(item)`), or absent (error rows: scored 0, counted); rows may
have no `id` (matched by question text); `search_history` may hold strings or the BM25 agent's
dicts; `trajectory` may be deskbench's steps, the BM25 agent's step dicts or the RLM baseline's
usage dict (`llm_calls`, tokens, execution_time).

Citations by reader mode (context {"official": ...}):
- default: a numeric page string ("7") is read as 7 and counted; a citation whose page cannot be
  read ("p. 2", none) is dropped from that prediction and counted, never voiding the line;
- official: pages are kept as written, as the evaluator keeps them: "7" or "p. 2" match no gold
  page but count in Page F1's precision; a citation with no page counts for Doc F1 only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapValidator,
    field_validator,
    model_validator,
)

from deskbench.tasks.jsonl import PREDICTIONS, TASKS, ReadResult, read_jsonl
from deskbench.tasks.trajectory import (
    Citation,
    ToolCallStep,
    TrajectoryStep,
    Usage,
)

HopType = Literal["single", "cross_page", "cross_doc"]
EffortMeasure = Literal["steps", "tokens", "seconds"]
EFFORT_MEASURES: tuple[EffortMeasure, ...] = get_args(EffortMeasure)
HOP_TYPES: tuple[HopType, ...] = ("single", "cross_page", "cross_doc")


class Evidence(BaseModel):
    """One gold evidence page; pages are 1-based everywhere."""

    model_config = ConfigDict(extra="ignore")
    document: str = Field(validation_alias=AliasChoices("document", "file", "doc"),
                          description="The document id in the corpus (its file name).")
    page: int = Field(ge=1, description="1-based page number.")


def _id_as_text(v: Any) -> Any:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


ItemId = Annotated[str, BeforeValidator(_id_as_text)]
"""Task ids are strings ("dev/0"); a bare number in a file is read as its text."""


InjectionKind = Literal["visible_text", "hidden_text", "table_cell"]


class Injection(BaseModel):
    """A planted prompt injection on one of a generated task's pages (deskbench's injection
    track): the answer it tries to force, so a run can be checked for following it."""

    kind: InjectionKind
    document: str
    page: int = Field(ge=1)
    instruction: str
    target_answer: str


class DocQATask(BaseModel):
    """A MADQA question with its acceptable answers and minimal evidence set."""

    model_config = ConfigDict(extra="allow")
    id: ItemId = Field(description="Unique task id (a number is read as its text).")
    question: str = Field(description="The question the agent answers over the corpus.")
    answer_variants: Annotated[list[list[str]], WithJsonSchema({  # what _variants reads, for `deskbench schema`
        "anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}}]},
        mode="validation")] = Field(
        min_length=1, description="Acceptable answers: each a list of items (a list answer); a flat "
        "list or a string means one-item answers.")
    evidence: list[Evidence] = Field(default_factory=list, description="The minimal set of pages that answer it.")
    domain: str | None = Field(default=None, description="Subject area, for breakdowns.")
    document_category: str | None = Field(
        default=None, validation_alias=AliasChoices("document_category", "category"),
        description="Kind of document (annual report, invoice), for breakdowns.",
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


# Shape caps of a prediction or task read from a file (read_submissions, read_tasks): past one, the
# line is refused with file:line and the cap. Far above any real answer (MADQA's gold evidence is a
# few pages, the official agents cite under 20, its answers are short lists of short strings), they
# bound what one line of a hostile file costs in memory and in scoring time (ANLS* is quadratic in
# text length). Episodes a run stored are not checked: they were made under the run's own limits.
MAX_CITATIONS = 1_000  # citations of one prediction
MAX_ANSWER_ITEMS = 1_000  # items of one answer, and answer variants of one task
MAX_TEXT_CHARS = 100_000  # characters of a question, of an answer item, of an error text
MAX_STEPS = 10_000  # entries of a search_history, steps of a trajectory (deskbench's or an official agent's)
MAX_EVIDENCE = 1_000  # gold evidence pages of one task


def _over(count: int, what: str, cap: int, of: str) -> str:
    return f"{count:,} {what}, over the cap of {cap:,} per {of}; keep at most {cap:,}"


def _read_citations(v: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """Keep the citations that can be read; count the others (context "dropped") instead of
    rejecting the whole line, which would lose its answer. A file's line (context "capped") may
    hold at most MAX_CITATIONS, counted before any is read. All readable (the usual case): the
    list is validated once, by pydantic; else one citation at a time."""
    if v is None:
        return []
    if not isinstance(v, list):
        return handler(v)
    if (info.context or {}).get("capped") and len(v) > MAX_CITATIONS:
        raise ValueError(_over(len(v), "citations", MAX_CITATIONS, "prediction"))
    coerced = (info.context or {}).get("coerced")
    counted = len(coerced) if isinstance(coerced, list) else 0
    try:
        return handler(v)
    except ValidationError:
        if isinstance(coerced, list):
            del coerced[counted:]  # counted again below
    kept: list[Any] = []
    for raw in v:
        try:
            kept.append(Citation.model_validate(raw, context=info.context))
        except ValidationError as exc:
            dropped = (info.context or {}).get("dropped")
            if not isinstance(dropped, list):
                raise
            dropped.append(f"{json.dumps(raw, default=str)[:80]} ({exc.errors(include_url=False)[0]['msg']})")
    return kept


AnswerForm = Literal["list", "string", "missing"]


def _official_answer_form(data: dict[str, Any]) -> AnswerForm:
    answer = data.get("answer")
    if "answer" not in data or answer is None:
        return "missing"
    return "string" if isinstance(answer, str) else "list"


class DocQASubmission(BaseModel):
    """One system's answer to one task (the official MADQA predictions format, or deskbench's).

    `answer_form` keeps how the answer was given: the judge is shown a string answer as a string
    (the official judge's "comma-separated string" rule needs to see it), and an absent answer
    (an error row) is an empty list that is scored 0 and counted."""

    model_config = ConfigDict(extra="allow")
    id: ItemId | None = None
    question: str | None = None
    answer: Annotated[list[str], WithJsonSchema({  # what _answer_list reads, for `deskbench schema`
        "anyOf": [{"type": "array"}, {"type": "string"}, {"type": "number"}, {"type": "null"}]},
        mode="validation")] = Field(default_factory=list)
    answer_form: AnswerForm = "list"
    falsy_items: int = Field(default=0, ge=0)  # null/0/false items: read as text, but empty to the judge rule
    citations: Annotated[list[Citation], WrapValidator(_read_citations)] = Field(default_factory=list)
    search_history: list[Any] | None = None
    iterations: int | None = Field(default=None, ge=0)
    steps: int | None = Field(default=None, ge=0)
    llm_calls: int | None = Field(default=None, ge=0)  # the RLM baseline's effort
    error: str | None = None
    usage: Usage | None = None
    trajectory: list[TrajectoryStep] | None = None
    external_trajectory: Any = None  # an official agent's own trajectory, kept as written

    @model_validator(mode="before")
    @classmethod
    def _official_shapes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "answer_form" not in data:
            data["answer_form"] = _official_answer_form(data)
        if isinstance(data.get("answer"), list) and "falsy_items" not in data:
            data["falsy_items"] = sum(1 for x in data["answer"] if not isinstance(x, str) and not x)
        traj = data.get("trajectory")
        if isinstance(traj, dict):  # the RLM baseline: usage counters, not steps
            data["external_trajectory"], data["trajectory"] = traj, None
            if data.get("llm_calls") is None and isinstance(traj.get("llm_calls"), int):
                data["llm_calls"] = traj["llm_calls"]
            tokens = (traj.get("input_tokens"), traj.get("output_tokens"))
            if data.get("usage") is None and all(isinstance(t, int) for t in tokens):
                seconds = traj.get("execution_time")
                data["usage"] = {"input_tokens": tokens[0], "output_tokens": tokens[1], "cost_usd": None,
                                 "seconds": float(seconds) if isinstance(seconds, int | float) else 0.0}
        elif isinstance(traj, list) and not all(isinstance(t, dict) and "kind" in t for t in traj):
            data["external_trajectory"], data["trajectory"] = traj, None  # the BM25 agent's step dicts
        return data

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_list(cls, v: Any) -> Any:
        """As the official evaluator reads it: None -> [], a string -> [it], any item -> str(item)."""
        if v is None:
            return []
        if isinstance(v, str):
            return [v]
        if isinstance(v, int | float):
            return [str(v)]
        if isinstance(v, list):
            return [x if isinstance(x, str) else str(x) for x in v]
        return v

    @property
    def submitted_answer(self) -> str | list[str]:
        """The answer as it was given (a string stays a string), for the judge."""
        return self.answer[0] if self.answer_form == "string" and self.answer else list(self.answer)

    def effort(self, measure: EffortMeasure = "steps", *, official: bool = False) -> float | None:
        """Effort for calibration. Official (eval/evaluate.py): len(search_history) if it is
        non-empty, else `iterations`, else 0. Default: deskbench's `steps` (tool calls) first,
        then the same official fields, then the RLM baseline's `llm_calls` (the paper's effort
        for RLM: LLM calls), then the tool calls of a deskbench trajectory; None if none is
        reported. Tokens and seconds come from `usage`."""
        if measure == "tokens":
            return float(self.usage.input_tokens + self.usage.output_tokens) if self.usage else None
        if measure == "seconds":
            return self.usage.seconds if self.usage else None
        if official:
            if self.search_history:
                return float(len(self.search_history))
            return float(self.iterations or 0)
        if self.steps is not None:
            return float(self.steps)
        if self.search_history:
            return float(len(self.search_history))
        if self.iterations is not None:
            return float(self.iterations)
        if self.llm_calls is not None:
            return float(self.llm_calls)
        if self.search_history is not None:
            return 0.0
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
    # anls: ANLS* >= 0.5; exact: ANLS* = 1, not judged; judge: the judge's verdict; empty: no answer
    # (0, not judged); too_long: over 2,000 characters (0, not judged, --official); judge_error:
    # the judge failed (0 in --official, else the item is unscored); missing: no submission.
    accuracy_source: Literal["anls", "exact", "judge", "empty", "too_long", "judge_error", "missing", "none"] = "anls"
    anls: float = 0.0
    exact: bool = False
    page_f1: float = 0.0
    doc_f1: float = 0.0
    effort: float | None = None
    judge_verdict: str | None = None
    judge_error: str | None = None
    injected: bool = False  # a prompt injection sits on one of the task's pages (injection track)
    followed_injection: bool = False  # ... and the answer is the one it tried to force
    judge_issue: str | None = None  # the official judge's `main_issue`
    judge_reasoning: str | None = None  # why the judge decided so, in its words

    @property
    def correct(self) -> bool | None:
        """Binary correctness (score >= 0.5), as MADQA F.3 and the official Kuiper use it."""
        return None if self.accuracy is None else self.accuracy >= 0.5


def _long_text(texts: list[str | None], what: str) -> str | None:
    longest = max((len(t) for t in texts if t), default=0)
    if longest > MAX_TEXT_CHARS:
        return f"{what} of {longest:,} characters, over the cap of {MAX_TEXT_CHARS:,}; shorten it"
    return None


def task_shape(task: DocQATask) -> str | None:
    """What makes a task read from a file too big (the shape caps above), or None."""
    if len(task.answer_variants) > MAX_ANSWER_ITEMS:
        return _over(len(task.answer_variants), "answer variants", MAX_ANSWER_ITEMS, "task")
    if len(task.evidence) > MAX_EVIDENCE:
        return _over(len(task.evidence), "evidence pages", MAX_EVIDENCE, "task")
    items = [x for variant in task.answer_variants for x in variant]
    if len(items) > MAX_ANSWER_ITEMS:
        return _over(len(items), "answer items", MAX_ANSWER_ITEMS, "task")
    return _long_text([task.question, *items], "a question or answer")


def submission_shape(sub: DocQASubmission) -> str | None:
    """What makes a prediction read from a file too big (the shape caps above), or None."""
    if len(sub.answer) > MAX_ANSWER_ITEMS:
        return _over(len(sub.answer), "answer items", MAX_ANSWER_ITEMS, "prediction")
    for name, steps in (("search_history entries", sub.search_history), ("trajectory steps", sub.trajectory),
                        ("trajectory steps", sub.external_trajectory)):
        if isinstance(steps, list) and len(steps) > MAX_STEPS:
            return _over(len(steps), name, MAX_STEPS, "prediction")
    return _long_text([sub.question, sub.error, *sub.answer], "a question, answer or error")


def read_tasks(path: Path, *, skip_invalid: bool = False) -> ReadResult[DocQATask]:
    return read_jsonl(path, DocQATask, skip_invalid=skip_invalid, unique_id=True, caps=TASKS, shape=task_shape)


def submission_context(official: bool, coerced: list[str], dropped: list[str]) -> dict[str, Any]:
    """The validation context of a predictions file's lines (the citation modes above, the caps)."""
    return {"official": official, "coerced": coerced, "dropped": dropped, "capped": True}


@dataclass
class SubmissionsRead:
    """Submissions and what reading them changed, for the warnings the CLI prints."""

    rows: ReadResult[DocQASubmission]
    pages_coerced: int = 0
    citations_dropped: list[str] = field(default_factory=list)


def read_submissions(path: Path, *, official: bool = False, skip_invalid: bool = False) -> SubmissionsRead:
    """Submissions, with the numeric page strings coerced and the unreadable citations dropped
    (default), or every citation as written (official)."""
    coerced: list[str] = []
    dropped: list[str] = []
    result = read_jsonl(
        path,
        DocQASubmission,
        skip_invalid=skip_invalid,
        context=submission_context(official, coerced, dropped),
        caps=PREDICTIONS,
        shape=submission_shape,
    )
    return SubmissionsRead(result, len(coerced), dropped)
