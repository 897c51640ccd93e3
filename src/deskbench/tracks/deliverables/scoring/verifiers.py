"""Deterministic verifiers for deliverables (the consulting DRA paper, §3.3 and Appendix A).

Each verifier reads the response text (markdown) or a produced output file (docx, xlsx, pptx,
json) and returns pass, fail or unobservable, with the evidence it looked at. Verifiers are
found by spec `kind` in REGISTRY; `verifier_pass_rate` is the paper's V, with unobservable
results counted as failed and reported.

`run_verifiers` takes a sync judge for `llm_check`; `arun_verifiers` takes an async one (a model
behind `verifiers_judge.llm_check_judge`) and asks it for every judged check concurrently. Both
go through `run_verifier` for every other kind, and share how a judged check reads its text and
turns the judge's answer (or its failure) into a result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.tracks.deliverables.scoring.verifier_base import (
    AsyncLlmJudge,
    JudgeError,
    LlmJudge,
    Status,
    Verifier,
    VerifierContext,
    VerifierResult,
)
from deskbench.tracks.deliverables.scoring.verifiers_citations import verify_citation_domains
from deskbench.tracks.deliverables.scoring.verifiers_judge import llm_check_judge
from deskbench.tracks.deliverables.scoring.verifiers_structure import (
    llm_check_text,
    llm_check_verdict,
    verify_exact_value,
    verify_file_sections,
    verify_json_strict,
    verify_llm_check,
    verify_section_count,
    verify_word_limit,
)
from deskbench.tracks.deliverables.scoring.verifiers_values import (
    verify_decision_line,
    verify_numeric,
    verify_regex_absent,
    verify_regex_present,
)
from deskbench.tracks.deliverables.verifier_specs import LlmCheckSpec, VerifierSpec

__all__ = [
    "REGISTRY",
    "AsyncLlmJudge",
    "JudgeError",
    "LlmJudge",
    "PassRate",
    "Status",
    "Verifier",
    "VerifierContext",
    "VerifierResult",
    "arun_verifiers",
    "llm_check_judge",
    "run_verifier",
    "run_verifiers",
    "verifier_pass_rate",
]

REGISTRY: dict[str, Verifier] = {
    "numeric": verify_numeric,
    "decision_line": verify_decision_line,
    "regex_present": verify_regex_present,
    "regex_absent": verify_regex_absent,
    "json_strict": verify_json_strict,
    "exact_value": verify_exact_value,
    "file_sections": verify_file_sections,
    "word_limit": verify_word_limit,
    "section_count": verify_section_count,
    "citation_domains": verify_citation_domains,
    "llm_check": verify_llm_check,
}


def _tag(spec: VerifierSpec, result: VerifierResult) -> VerifierResult:
    return result.model_copy(update={"id": spec.id, "kind": spec.kind})


def run_verifier(spec: VerifierSpec, ctx: VerifierContext) -> VerifierResult:
    """One spec checked against `ctx`, its result tagged with the spec's id and kind."""
    return _tag(spec, REGISTRY[spec.kind](spec, ctx))


def run_verifiers(
    specs: Sequence[VerifierSpec],
    response: str,
    outputs_dir: Path | None = None,
    *,
    judge: LlmJudge | None = None,
) -> list[VerifierResult]:
    """Every spec against one response; output files are read once and shared."""
    ctx = VerifierContext(response=response, outputs_dir=outputs_dir, judge=judge)
    return [run_verifier(spec, ctx) for spec in specs]


async def arun_verifiers(
    specs: Sequence[VerifierSpec],
    response: str,
    outputs_dir: Path | None = None,
    *,
    judge: AsyncLlmJudge | None,
) -> list[VerifierResult]:
    """`run_verifiers` with an async judge: the judged checks are asked concurrently (the
    judge's model limits its own concurrency); results come back in spec order. A judge that
    raises JudgeError leaves its check unobservable, with the error as evidence."""
    ctx = VerifierContext(response=response, outputs_dir=outputs_dir)

    async def one(spec: VerifierSpec) -> VerifierResult:
        if judge is None or not isinstance(spec, LlmCheckSpec):
            return run_verifier(spec, ctx)  # no judge: llm_check says so, as in run_verifiers
        text = llm_check_text(spec, ctx)
        if isinstance(text, VerifierResult):
            return _tag(spec, text)
        try:
            outcome: tuple[bool, str] | JudgeError = await judge(spec.criterion, text)
        except JudgeError as exc:
            outcome = exc
        return _tag(spec, llm_check_verdict(outcome))

    return list(await asyncio.gather(*(one(spec) for spec in specs)))


class PassRate(BaseModel):
    """The paper's V (percent) with its parts; unobservable results count as failed."""

    passed: int
    failed: int
    unobservable: int
    judged: int
    total: int
    v: float  # 0..100

    @property
    def rate(self) -> float:
        return self.v / 100.0


def verifier_pass_rate(results: Sequence[VerifierResult]) -> PassRate:
    """V = passed / all verifiers x 100; a task with no verifiers has V = 0."""
    passed = sum(r.status == "pass" for r in results)
    unobservable = sum(r.status == "unobservable" for r in results)
    failed = sum(r.status == "fail" for r in results)
    total = len(results)
    return PassRate(
        passed=passed,
        failed=failed,
        unobservable=unobservable,
        judged=sum(r.judged for r in results),
        total=total,
        v=100.0 * passed / total if total else 0.0,
    )
