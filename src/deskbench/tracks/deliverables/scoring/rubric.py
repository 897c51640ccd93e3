"""The five-criterion SME rubric (the consulting DRA paper, §3.3 Table 4 and Appendix B Table 19).

A `RubricGrade` is one grader's five scores (0..3) with a justification each, for one episode
(task x system x attempt). It carries the graded episode's `finished_at` as `episode_stamp`: an
episode rerun later (RunStore.record(replace=True)) gets a new stamp, so grades of the old
episode are recognisably stale. A `GradeFailure` records "could not grade" (the grader's call
failed or never gave a valid reply); it is never a score of 0.

`grade_with_model` is the LLM grader: it shows the model the SME's evidence and the task's
Table 19 anchors, asks for a justification then a score per criterion, through `ask_json` (one
repair turn), in one call for all five criteria (mode "all") or one call per criterion
("per-criterion"). The prompt text lives in rubric_prompts.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deskbench.models.types import ChatModel, Message
from deskbench.runs.store import Episode, now
from deskbench.scoring.json_reply import ask_json
from deskbench.tracks.deliverables.scoring import rubric_prompts as P
from deskbench.tracks.deliverables.scoring.verifier_base import VerifierResult
from deskbench.tracks.deliverables.tasks import (
    RUBRIC_CODES,
    TABLE_19,
    DeliverableSubmission,
    DeliverableTask,
    GoldenValue,
    RubricCode,
    RubricCriterion,
)

__all__ = [
    "CAPS",
    "CriterionGrade",
    "GradeFailure",
    "GRADE_MODES",
    "GradeMode",
    "RubricGrade",
    "Source",
    "evidence_text",
    "grade_episode",
    "grade_with_model",
    "rubric_text",
    "unnegated",
]

Source = Literal["llm", "human"]
GradeMode = Literal["all", "per-criterion"]
GRADE_MODES: tuple[GradeMode, ...] = get_args(GradeMode)

CAPS: dict[str, int] = {
    "prompt": 6000,
    "golden": 3000,
    "logic": 4000,
    "tests": 1500,
    "traps": 3000,
    "verifiers": 6000,
    "response": 16000,
    "file": 8000,
    "files": 20000,
}
"""Characters of each piece of evidence shown to the grader; longer text is cut with a note."""


def _score(value: Any) -> int:
    """An integer 0..3; a bool or a fractional number is not a score."""
    if isinstance(value, bool):
        raise ValueError("score must be an integer 0-3, got a boolean")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"score must be an integer 0-3, got {value}")
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise ValueError(f"score must be an integer 0-3, got {value!r}")
    if not 0 <= value <= 3:
        raise ValueError(f"score must be an integer 0-3, got {value}")
    return value


def _justification(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("justification must be non-empty text (every score, a 0 above all, needs one)")
    return value.strip()


class _ScoreChecks(BaseModel):
    """The score and justification rules, for every model that holds a graded cell (the fields
    are declared by each subclass, in the order its readers want them)."""

    @field_validator("score", mode="before", check_fields=False)
    @classmethod
    def _s(cls, v: Any) -> int:
        return _score(v)

    @field_validator("justification", mode="before", check_fields=False)
    @classmethod
    def _j(cls, v: Any) -> str:
        return _justification(v)


class CriterionGrade(_ScoreChecks):
    """One criterion's score (0..3) and the justification for it (never empty)."""

    model_config = ConfigDict(extra="forbid")
    code: RubricCode
    score: int
    justification: str


class RubricGrade(BaseModel):
    """One grader's grade of one episode: exactly the five criteria DI, AR, RF, EP, FD."""

    model_config = ConfigDict(extra="forbid")
    task_id: str = Field(min_length=1)
    system: str = Field(min_length=1)
    attempt: int = Field(default=0, ge=0)
    grader: str = Field(min_length=1)
    source: Source
    criteria: dict[RubricCode, CriterionGrade]
    comment: str = ""
    # The grader declares this the best response to its task among the systems' responses: the
    # SME-declared best that §4.4 compares with the per-task VRS argmax (90.5% in the paper,
    # where a regex read it from the Comments column; deskbench records it explicitly).
    declared_best: bool = False
    # Response 1..N of the task as the grader saw them (the systems, in that order): what
    # "Response N" / "RN" in `comment` refers to (rubric_best.py); empty on a grade stored
    # before it was kept (the run's systems in name order are read then).
    responses: list[str] = Field(default_factory=list)
    episode_stamp: str = Field(min_length=1)
    created_at: str = Field(default_factory=now)

    @field_validator("criteria", mode="before")
    @classmethod
    def _listed(cls, v: Any) -> Any:
        """A list of criterion grades is keyed by code."""
        if isinstance(v, list):
            return {(c.code if isinstance(c, CriterionGrade) else c.get("code")): c for c in v}
        return v

    @model_validator(mode="after")
    def _five(self) -> RubricGrade:
        if sorted(self.criteria) != sorted(RUBRIC_CODES):
            missing = [c for c in RUBRIC_CODES if c not in self.criteria]
            raise ValueError(f"criteria must be exactly DI, AR, RF, EP, FD; missing {', '.join(missing)}")
        for code, cell in self.criteria.items():
            if cell.code != code:
                raise ValueError(f"criterion under {code} says it is {cell.code}")
        return self

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.task_id, self.system, self.attempt)

    @property
    def scores(self) -> dict[str, int]:
        return {c: self.criteria[c].score for c in RUBRIC_CODES}

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(RUBRIC_CODES)


class GradeFailure(BaseModel):
    """A grader could not grade an episode (failed call, no valid reply): not a low grade."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    system: str
    attempt: int = 0
    grader: str
    error: str
    episode_stamp: str = ""
    created_at: str = Field(default_factory=now)


_NEGATION = re.compile(r"\b(?:no|not|without|never|nor|free of|absence of|zero)\s+(?:[\w'-]+\s+){0,2}$", re.I)


def unnegated(pattern: re.Pattern[str], text: str) -> list[str]:
    """The matches of `pattern` in `text` that are not negated ("no fabrication", "not
    unusable", "without any scope creep", "no sign of fabrication"): a match preceded by no /
    not / without / never / nor / free of / absence of / zero, at most two words before it,
    is skipped."""
    found = []
    for m in pattern.finditer(text):
        if not _NEGATION.search(text[max(0, m.start() - 40):m.start()]):
            found.append(m.group(0))
    return found


# -- the evidence ---------------------------------------------------------------------------


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... cut: {len(text) - limit} more characters not shown]"


def rubric_text(criteria: Sequence[RubricCriterion]) -> str:
    """Each criterion's name and its 0-3 anchors, as the grader reads them."""
    lines = []
    for c in criteria:
        lines.append(f"{c.code} - {c.name}")
        lines.extend(f"  {s}: {c.anchors[s]}" for s in sorted(c.anchors))
    return "\n".join(lines)


def _criteria(task: DeliverableTask) -> dict[str, RubricCriterion]:
    by_code: dict[str, RubricCriterion] = {c.code: c for c in task.rubric}
    for code in RUBRIC_CODES:  # a task always has all five; Table 19 is only a fallback
        if code not in by_code:
            name, anchors = TABLE_19[code]
            by_code[code] = RubricCriterion(code=code, name=name, anchors=dict(enumerate(anchors)))
    return by_code


def _golden(task: DeliverableTask) -> str:
    g = task.golden
    lines = [g.answer]
    if g.decision:
        lines.append(f"Decision: {g.decision}")
    for v in g.values:
        lines.append(f"- {v.name}: {_figure(v)}" + (f" {v.unit}" if v.unit else ""))
    return "\n".join(lines)


def _figure(v: GoldenValue) -> str:
    """A golden figure as the grader reads it: its value, or its range (it has exactly one)."""
    if v.value is not None:
        return f"{v.value:g}"
    if v.range is None:
        raise ValueError(f"golden value {v.name!r} has neither a value nor a range")
    return f"{v.range[0]:g} to {v.range[1]:g}"


def _verifier_lines(results: Sequence[VerifierResult] | None) -> str:
    if results is None:
        return "(not run)"
    if not results:
        return "(the task has no verifiers)"
    return "\n".join(f"- {r.id} [{r.kind}] {r.status.upper()}: {r.evidence}" for r in results)


def output_texts(submission: DeliverableSubmission, outputs: Path | None) -> list[dict[str, str]]:
    """The text of each produced file (or why there is none), each capped, in order. `outputs`:
    the episode's files folder as runs/outputs.py confines it (None: none to read)."""
    from deskbench.runs.outputs import output_file
    from deskbench.tracks.deliverables.scoring.office import UnreadableFile, read_output

    out: list[dict[str, str]] = []
    budget = CAPS["files"]
    for rec in submission.files:
        path = output_file(outputs, rec.name)
        if path is None:
            text = "(file recorded but not found in the run directory)"
        else:
            try:
                text = read_output(path).text or "(the file opens but holds no text)"
            except UnreadableFile as exc:
                text = f"(the file does not open: {exc})"
        text = cap(text, min(CAPS["file"], max(budget, 200)))
        budget -= len(text)
        out.append({"name": rec.name, "text": text})
    return out


def evidence_text(task: DeliverableTask, submission: DeliverableSubmission, outputs: Path | None,
                  verifier_results: Sequence[VerifierResult] | None = None) -> str:
    """The SME's evidence: task, golden, logic, tests, traps, verifiers, response, files."""
    required = "\n".join(f"- {o.name} ({o.format})" + (f": sections {', '.join(o.sections)}" if o.sections else "")
                         for o in task.required_outputs) or "(none: the response text is the deliverable)"
    traps = "\n".join(f"- {t.id} ({t.kind}): {t.description}" + (f" Lure: {t.lure}." if t.lure else "")
                      + f" Caught by: {', '.join(t.verifiers)}." for t in task.traps) or "(none)"
    logic = "\n".join(f"{i}. {s}" for i, s in enumerate(task.solution_logic, 1))
    files = output_texts(submission, outputs)
    return P.EVIDENCE.format(
        prompt=cap(task.full_prompt, CAPS["prompt"]),
        outputs=required,
        golden=cap(_golden(task), CAPS["golden"]),
        logic=cap(logic, CAPS["logic"]),
        lazy=cap(task.lazy_ai_test, CAPS["tests"]),
        expert=cap(task.expert_test, CAPS["tests"]),
        traps=cap(traps, CAPS["traps"]),
        verifiers=cap(_verifier_lines(verifier_results), CAPS["verifiers"]),
        response=json.dumps(cap(submission.response, CAPS["response"]), ensure_ascii=False),
        files=json.dumps(files, ensure_ascii=False, indent=1) if files else "[] (no output files)",
    )


# -- the grader's replies ---------------------------------------------------------------------


class _Cell(_ScoreChecks):
    justification: str  # before the score: the grader reasons, then scores
    score: int


class _AllReply(BaseModel):
    criteria: dict[str, _Cell]
    comment: str = ""

    @field_validator("criteria")
    @classmethod
    def _five(cls, v: dict[str, _Cell]) -> dict[str, _Cell]:
        missing = [c for c in RUBRIC_CODES if c not in v]
        if missing:
            raise ValueError(f"missing criteria {', '.join(missing)}; give all of DI, AR, RF, EP, FD")
        return v


_CELL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"justification": {"type": "string", "minLength": 1},
                   "score": {"type": "integer", "enum": [0, 1, 2, 3]}},
    "required": ["justification", "score"],
    "additionalProperties": False,
}
_ALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "criteria": {"type": "object", "properties": {c: _CELL_SCHEMA for c in RUBRIC_CODES},
                     "required": list(RUBRIC_CODES), "additionalProperties": False},
        "comment": {"type": "string"},
    },
    "required": ["criteria", "comment"],
    "additionalProperties": False,
}


async def grade_with_model(
    model: ChatModel,
    task: DeliverableTask,
    submission: DeliverableSubmission,
    run_dir: Path,
    *,
    mode: GradeMode = "all",
    verifier_results: Sequence[VerifierResult] | None = None,
    system: str = "",
    attempt: int = 0,
    episode_stamp: str = "",
) -> RubricGrade | GradeFailure:
    """Grade one submission with `model` (a judge: temperature 0 where the model takes one). Mode "all": one call for the five
    criteria; "per-criterion": five calls, one criterion each. A call that fails, or a reply that
    stays invalid after the repair turn, gives a GradeFailure naming why (never a 0).

    `system`, `attempt` and `episode_stamp` name the graded episode (see `grade_episode`)."""
    if mode not in ("all", "per-criterion"):
        raise ValueError(f"mode must be 'all' or 'per-criterion', not {mode!r}")
    asker = model
    criteria = _criteria(task)
    from deskbench.runs.outputs import outputs_folder

    evidence = evidence_text(task, submission, outputs_folder(run_dir, system, task.id, attempt, submission.files_dir),
                             verifier_results)
    who = system or "?"

    def fail(error: str) -> GradeFailure:
        return GradeFailure(task_id=task.id, system=who, attempt=attempt, grader=model.id, error=error,
                            episode_stamp=episode_stamp)

    cells: dict[str, _Cell]
    if mode == "all":
        request = "\n\n".join([evidence, P.RUBRIC_HEADER, rubric_text([criteria[c] for c in RUBRIC_CODES]),
                               P.ALL_REQUEST.format(codes=", ".join(RUBRIC_CODES))])
        reply = await ask_json(asker, [Message(role="system", content=P.GRADER_SYSTEM),
                                       Message(role="user", content=request)],
                               _AllReply, response_schema=_ALL_SCHEMA, shape=P.ALL_SHAPE)
        if reply.value is None:
            return fail(reply.error or "no valid reply")
        cells = {c: reply.value.criteria[c] for c in RUBRIC_CODES}
        comment = reply.value.comment.strip()
    else:
        async def one(code: str) -> tuple[str, _Cell | None, str]:
            c = criteria[code]
            request = "\n\n".join([evidence, P.RUBRIC_HEADER, rubric_text([c]),
                                   P.ONE_REQUEST.format(code=code, name=c.name)])
            r = await ask_json(asker, [Message(role="system", content=P.GRADER_SYSTEM),
                                       Message(role="user", content=request)],
                               _Cell, response_schema=_CELL_SCHEMA, shape=P.ONE_SHAPE)
            return code, r.value, r.error or ""

        results = await asyncio.gather(*(one(c) for c in RUBRIC_CODES))
        errors = [f"{code}: {err}" for code, cell, err in results if cell is None]
        if errors:
            return fail("; ".join(errors))
        cells = {code: cell for code, cell, _ in results if cell is not None}
        comment = ""
    return RubricGrade(
        task_id=task.id, system=who, attempt=attempt, grader=model.id, source="llm", comment=comment,
        episode_stamp=episode_stamp or "?",
        criteria={c: CriterionGrade(code=c, score=cells[c].score, justification=cells[c].justification)
                  for c in RUBRIC_CODES},
    )


async def grade_episode(
    model: ChatModel,
    task: DeliverableTask,
    episode: Episode,
    run_dir: Path,
    *,
    mode: GradeMode = "all",
    verifier_results: Sequence[VerifierResult] | None = None,
) -> RubricGrade | GradeFailure:
    """`grade_with_model` for a stored episode: names it and stamps the grade with its finished_at."""
    sub = episode.submission
    if episode.status != "ok" or not isinstance(sub, DeliverableSubmission):
        return GradeFailure(task_id=episode.task_id, system=episode.system, attempt=episode.attempt,
                            grader=model.id, episode_stamp=episode.finished_at,
                            error=f"episode ended with status {episode.status}; only ok deliverables are graded")
    return await grade_with_model(model, task, sub, run_dir, mode=mode, verifier_results=verifier_results,
                                  system=episode.system, attempt=episode.attempt,
                                  episode_stamp=episode.finished_at)
