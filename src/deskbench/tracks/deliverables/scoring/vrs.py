"""Verifier-Rubric Score and the ACCEPT rule for one graded deliverable (consulting paper §3.3).

A graded response has five SME rubric scores r_i in {0, 1, 2, 3} (DI, AR, RF, EP, FD) and a
verifier pass rate V in percent. The paper aggregates them into

    VRS_0 = 0.5 V + 0.5 * rbar / 3 * 100          (Eq. 1, relaxed)
    VRS   = VRS_0 * 1[min_i r_i > 0]               (Eq. 2, strict)
    ACCEPT <=> min_i r_i > 0 and rbar >= 2.5 and V >= 80   (Eq. 3)

ACCEPT is defined on the components, not on VRS, so reweighting VRS (Table 18, `Weighting`)
never changes ACCEPT. Inputs are validated here once, so a mistyped score (a 4, a 2.5, a missing
criterion) fails loudly instead of shifting an aggregate. No analysis imports: the statistics
over many rows live in `deskbench.analysis.stats`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, model_validator

from deskbench.tracks.deliverables.tasks import RUBRIC_CODES

# Comparisons against the ACCEPT thresholds allow this much float noise: a pass rate computed
# as 100 * 4 / 5 or as a sum of fractions must not fall just under 80.
_EPS = 1e-9
_WEIGHT_KEYS = frozenset(("V", *RUBRIC_CODES))


def _checked_v(v: float) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"verifier pass rate V must be a number in 0..100, not {v!r}")
    value = float(v)
    if not (0.0 <= value <= 100.0):  # also rejects nan
        raise ValueError(f"verifier pass rate V must be a percentage in 0..100, not {v!r}")
    return value


def _checked_scores(scores: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(scores, Mapping):
        raise ValueError(
            f"rubric scores must be a mapping code -> 0..3, not {type(scores).__name__}"
        )
    missing = [c for c in RUBRIC_CODES if c not in scores]
    if missing:
        raise ValueError(
            f"rubric scores miss {', '.join(missing)}: all of {', '.join(RUBRIC_CODES)} are needed"
        )
    extra = sorted(str(k) for k in scores if k not in RUBRIC_CODES)
    if extra:
        raise ValueError(
            f"unknown rubric code(s) {', '.join(extra)}: expected {', '.join(RUBRIC_CODES)}"
        )
    out: dict[str, int] = {}
    for code in RUBRIC_CODES:
        r = scores[code]
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or not 0 <= int(r) <= 3:
            raise ValueError(f"rubric score {code} must be an integer 0..3, not {r!r}")
        out[code] = int(r)
    return out


def reasoning_mean(scores: Mapping[str, int]) -> float:
    """rbar: the mean of the five criterion scores (0..3)."""
    return sum(_checked_scores(scores).values()) / len(RUBRIC_CODES)


def _scaled(r: float) -> float:
    """A 0..3 score on the 0..100 scale of V."""
    return r / 3 * 100


def vrs_relaxed(v: float, scores: Mapping[str, int]) -> float:
    """Eq. 1: VRS_0 = 0.5 V + 0.5 * rbar / 3 * 100 (0..100), no penalty for criterion zeros."""
    return 0.5 * _checked_v(v) + 0.5 * _scaled(reasoning_mean(scores))


def auto_reject(scores: Mapping[str, int]) -> bool:
    """True when any criterion is 0: a catastrophic failure on one dimension rejects the response
    whatever the others are (Eq. 2's indicator and Eq. 3's first clause)."""
    return min(_checked_scores(scores).values()) == 0


def vrs_strict(v: float, scores: Mapping[str, int]) -> float:
    """Eq. 2: the relaxed VRS, or 0 when any criterion is 0 (the paper's headline variant)."""
    relaxed = vrs_relaxed(v, scores)
    return 0.0 if auto_reject(scores) else relaxed


def accept(
    v: float, scores: Mapping[str, int], *, mean_min: float = 2.5, v_min: float = 80.0
) -> bool:
    """Eq. 3: ACCEPT iff no criterion is 0, rbar >= mean_min and V >= v_min (both inclusive).

    With five integer scores rbar is a multiple of 0.2, so the default 2.5 means a sum >= 13."""
    checked = _checked_scores(scores)
    value = _checked_v(v)
    rbar = sum(checked.values()) / len(RUBRIC_CODES)
    return min(checked.values()) > 0 and rbar >= mean_min - _EPS and value >= v_min - _EPS


class Weighting(BaseModel):
    """A VRS weighting (Table 18): either `v_weight` + `rubric_weight` on V and on rbar scaled to
    0..100, or `criterion_weights` on "V" and each criterion (each r_i scaled r_i / 3 * 100, V
    as is). Weights are non-negative and sum to 1, so every variant stays on the 0..100 scale."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    v_weight: float | None = None
    rubric_weight: float | None = None
    criterion_weights: dict[str, float] | None = None

    @model_validator(mode="after")
    def _check(self) -> Weighting:
        two_part = self.v_weight is not None or self.rubric_weight is not None
        if two_part == (self.criterion_weights is not None):
            raise ValueError(
                f"weighting {self.name!r}: give either v_weight and rubric_weight, or "
                "criterion_weights, not both and not neither"
            )
        if two_part:
            if self.v_weight is None or self.rubric_weight is None:
                raise ValueError(f"weighting {self.name!r}: give both v_weight and rubric_weight")
            weights = [self.v_weight, self.rubric_weight]
        else:
            assert self.criterion_weights is not None
            keys = set(self.criterion_weights)
            if keys != _WEIGHT_KEYS:
                raise ValueError(
                    f"weighting {self.name!r}: criterion_weights needs exactly the keys "
                    f"V, {', '.join(RUBRIC_CODES)} (missing: {sorted(_WEIGHT_KEYS - keys)}, "
                    f"unknown: {sorted(keys - _WEIGHT_KEYS)})"
                )
            weights = list(self.criterion_weights.values())
        if any(not math.isfinite(w) or w < 0 for w in weights):
            raise ValueError(f"weighting {self.name!r}: weights must be finite and non-negative")
        if abs(sum(weights) - 1.0) > 1e-6:
            raise ValueError(f"weighting {self.name!r}: weights sum to {sum(weights):g}, not 1")
        return self


def vrs_weighted(
    v: float, scores: Mapping[str, int], weighting: Weighting, *, strict: bool = True
) -> float:
    """VRS under `weighting` (0..100); with strict, 0 when any criterion is 0 (as Eq. 2).

    The baseline 0.5/0.5 weighting gives exactly `vrs_relaxed` / `vrs_strict`."""
    checked = _checked_scores(scores)
    value = _checked_v(v)
    if weighting.criterion_weights is not None:
        w = weighting.criterion_weights
        score = w["V"] * value + sum(w[c] * _scaled(checked[c]) for c in RUBRIC_CODES)
    else:
        assert weighting.v_weight is not None and weighting.rubric_weight is not None
        rbar = sum(checked.values()) / len(RUBRIC_CODES)
        score = weighting.v_weight * value + weighting.rubric_weight * _scaled(rbar)
    if strict and min(checked.values()) == 0:
        return 0.0
    return score


PAPER_WEIGHTINGS: tuple[Weighting, ...] = (
    Weighting(name="baseline", v_weight=0.5, rubric_weight=0.5),
    Weighting(name="A", v_weight=0.35, rubric_weight=0.65),
    Weighting(name="B", v_weight=0.40, rubric_weight=0.60),
    Weighting(name="C", v_weight=0.25, rubric_weight=0.75),
    Weighting(
        name="D",
        criterion_weights={"V": 0.20, "EP": 0.21, "AR": 0.17, "DI": 0.17, "RF": 0.14, "FD": 0.11},
    ),
)
"""Table 18's weightings: the Eq. 1 baseline, rubric upweights A (0.35/0.65), B (0.40/0.60),
C (0.25/0.75), and D with weights proportional to each predictor's Spearman rho with ACCEPT."""


@dataclass(frozen=True)
class GradedRow:
    """One graded response: which system answered which task, its verifier pass rate V (0..100)
    and its five rubric scores. Validated on construction (a copy of `scores` is kept)."""

    system: str
    task_id: str
    v: float
    scores: Mapping[str, int] = field(hash=False)
    prompt_class: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "v", _checked_v(self.v))
        try:
            object.__setattr__(self, "scores", _checked_scores(self.scores))
        except ValueError as exc:
            raise ValueError(f"{self.system} / {self.task_id}: {exc}") from None

    @property
    def rbar(self) -> float:
        """The reasoning mean of this response."""
        return sum(self.scores.values()) / len(RUBRIC_CODES)

    @property
    def accepted(self) -> bool:
        """Eq. 3 with the paper's thresholds."""
        return accept(self.v, self.scores)
