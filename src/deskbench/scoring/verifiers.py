"""Deterministic verifiers for deliverables (the consulting DRA paper, §3.3 and Appendix A).

Each verifier reads the response text (markdown) or a produced output file (docx, xlsx, pptx,
json) and returns pass, fail or unobservable, with the evidence it looked at. Verifiers are
found by spec `kind` in REGISTRY; `verifier_pass_rate` is the paper's V, with unobservable
results counted as failed and reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from deskbench.scoring.verifier_base import (
    LlmJudge,
    Status,
    Verifier,
    VerifierContext,
    VerifierResult,
)
from deskbench.scoring.verifiers_structure import (
    verify_exact_value,
    verify_file_sections,
    verify_json_strict,
    verify_llm_check,
    verify_section_count,
    verify_word_limit,
)
from deskbench.scoring.verifiers_values import (
    verify_decision_line,
    verify_numeric,
    verify_regex_absent,
    verify_regex_present,
)
from deskbench.tasks.verifier_specs import VerifierSpec

__all__ = [
    "REGISTRY",
    "LlmJudge",
    "PassRate",
    "Status",
    "Verifier",
    "VerifierContext",
    "VerifierResult",
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
    "llm_check": verify_llm_check,
}


def run_verifier(spec: VerifierSpec, ctx: VerifierContext) -> VerifierResult:
    """One spec checked against `ctx`, its result tagged with the spec's id and kind."""
    result = REGISTRY[spec.kind](spec, ctx)
    return result.model_copy(update={"id": spec.id, "kind": spec.kind})


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
