"""Judge calibration (MADQA Appendix F.1): humans label a sample of (question, gold variants,
prediction) items correct / incorrect; the judge's sensitivity q1 and specificity q0 on them,
with the class counts m1, m0, feed the Rogan-Gladen correction of `deskbench score`.

- q1 = P(judge says correct | human says correct) = tp / m1
- q0 = P(judge says incorrect | human says incorrect) = tn / m0

The judge is the scoring pipeline as `deskbench score --judge` runs it: an answer exact under
ANLS* scores 1 without asking the model (verdict 1, source "exact"); the rest get the model's
verdict 1 / 0.5 / 0. Items the judge could not score carry no verdict.

Partial rule: a partial verdict (0.5) counts as half a "correct" and half an "incorrect" call:
on a human-correct item it adds 0.5 to tp and 0.5 to fn, on a human-incorrect item 0.5 to fp and
0.5 to tn. This is the rule that matches the scorer, where a partial adds 0.5 to the raw
accuracy p, so E[p] = theta q1 + (1 - theta)(1 - q0) holds and Rogan-Gladen inverts it. tp, fn,
tn, fp may therefore be halves; the partial items are counted (n_partial).

Labels: one JSON object a line, {"item_id", "labeller", "label": "correct" | "partial" |
"incorrect", "timestamp"}. A labeller's latest label of an item replaces their earlier ones; an item
whose labellers disagree is left out and counted (n_disagreed). "partial" is the judge's own middle
class (MADQA Prompt 4: the right content with a format issue or irrelevant additions), so a person
can label on the judge's three-way scale (F.1, §3.1); two-way files (correct / incorrect only) read
as before. q1 and q0 need a person's yes or no: an item a person labelled partial is left out of
them and counted (n_human_partial).

Quadratic-weighted kappa (MADQA §3.1: "excluding ~50% exact match cases where agreement is perfect
by construction, ... quadratic-weighted Cohen's kappa = 0.88 with human judgments"): the person's
label and the judge's verdict on the ordinal scale incorrect 0 < partial 1 < correct 2, weights
w_ij = (i - j)^2 / (k - 1)^2 with k = 3, kappa = 1 - sum(w O) / sum(w E), O the observed counts,
E the product of the two marginals over N; over the labelled items with a verdict whose verdict is
not an exact match (verdict_source "exact": the judge was not asked).

Sampling: from the items a track collects from its runs (the track's JudgeCalibration,
contract/cli.py: docqa's from tracks/docqa/scoring/docqa_calibration.py, analytics' from
tracks/analytics/scoring/analytics_calibration.py), with `random.Random(seed)`. With verdicts, the
sample is stratified by verdict class (exact, correct, partial, incorrect; for items with a
category: category x evaluator x verdict) with proportional allocation (largest remainder, at
least one item from every non-empty class), so the sample is self-weighting: q0 and q1 need no
reweighting. Items the judge left unscored are not sampled.

Items with a category (analytics, AIDABench §3.3.4: its evaluators against expert annotations)
carry what a person needs to label them (instruction, reference, key points, answer; the chart
image; the output and reference files). Besides q0 and q1 the calibration reports the raw
agreement rate (tp + tn) / (m0 + m1), the number §3.3.4 reports, with its Wilson interval, and
for items with a category all of it again per category (by_category). This module names no
track: an item says its own.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

from pydantic import BaseModel, Field, ValidationError, field_validator

from deskbench.analysis.stats import wilson_interval
from deskbench.errors import UserError
from deskbench.tasks.jsonl import _describe

if TYPE_CHECKING:
    from deskbench.runs.store import RunStore

QWK_RULE = ("quadratic-weighted Cohen's kappa on incorrect < partial < correct (w = (i - j)^2 / 4) between "
            "the person's label and the judge's verdict, over labelled items the judge was asked about "
            "(exact matches left out, as MADQA §3.1)")
ORDINAL: dict[str, int] = {"incorrect": 0, "partial": 1, "correct": 2}  # the scale of QWK
PARTIAL_RULE = ("a partial verdict (0.5) counts half as a correct call and half as an incorrect one "
                "(tp/fn or fp/tn += 0.5), as it adds 0.5 to the judged accuracy")

# docqa: "exact" (ANLS* = 1, the judge not asked), "judge"; analytics: the evaluator that decided
# (AnalyticsItemScore.source): "judge" / "numeric" / "exact" (qa), "chart_judge", "file_judge",
# "file_judge_deferred", "comparator"
VerdictSource = Literal["exact", "judge", "numeric", "chart_judge", "file_judge", "file_judge_deferred", "comparator"]
VERDICT_SOURCES: tuple[VerdictSource, ...] = get_args(VerdictSource)
Label = Literal["correct", "partial", "incorrect"]
LABELS: tuple[Label, ...] = get_args(Label)


class CalibrationItem(BaseModel):
    """One item to label: a system's answer to a question, and the judge's verdict when known.

    `track` names the track whose runs the item comes from ("docqa", the default: items files
    written before there was another load as they are). docqa items carry answer_variants and
    prediction; analytics items carry category, reference, key_points, answer and, for charts,
    chart_path (rubric = key_points), for files output_file and reference_file (absolute paths
    as of sampling)."""

    id: str  # "<run dir name>/<system>/<task id>"
    task_id: str
    run: str
    system: str
    question: str  # docqa: the question; analytics: the task instruction
    track: str = "docqa"
    answer_variants: list[list[str]] = Field(default_factory=list)
    prediction: list[str] = Field(default_factory=list)
    category: str | None = None  # the item's group, each with its own evaluator (analytics: qa, visualization, file_generation)
    reference: str | None = None  # analytics qa: the reference answer as the judge sees it
    key_points: list[str] = Field(default_factory=list)  # analytics: key points / chart rubric
    answer: str | None = None  # analytics: the model's final reply
    chart_path: str | None = None  # visualization: the chart the judge saw
    output_file: str | None = None  # file_generation: the file the evaluator read
    reference_file: str | None = None  # file_generation: the reference file
    judge_score: float | None = None  # analytics: the scorer's score (charts: S = 0.7 C + 0.3 R)
    chart_correctness: float | None = None  # visualization: C; the verdict is C = 1
    judge_verdict: float | None = None  # 1, 0.5 or 0; None when not judged (or unscored)
    verdict_source: VerdictSource | None = None
    judge: str | None = None
    judge_reason: str | None = None

    @field_validator("judge_verdict")
    @classmethod
    def _verdict(cls, v: float | None) -> float | None:
        if v is not None and v not in (0.0, 0.5, 1.0):
            raise ValueError("must be 1, 0.5 or 0")
        return v


class HumanLabel(BaseModel):
    item_id: str
    labeller: str = Field(min_length=1)
    label: Label
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))


class Calibration(BaseModel):
    """The judge's sensitivity q1 and specificity q0 on human labels (see the module docstring).
    q1 (q0) is None when no labelled item is human-correct (incorrect)."""

    q1: float | None
    q0: float | None
    q1_ci: tuple[float, float] | None
    q0_ci: tuple[float, float] | None
    m1: int
    m0: int
    tp: float
    fn: float
    tn: float
    fp: float
    n_partial: int
    n_labelled: int  # items with a usable label and a verdict (= m0 + m1)
    n_unlabelled: int
    n_no_verdict: int  # labelled items the judge did not score
    n_disagreed: int
    judge: str | None = None
    labellers: list[str] = Field(default_factory=list)
    partial_rule: str = PARTIAL_RULE
    ci_method: str = "Wilson score interval, 95%"
    # raw agreement with the humans, (tp + tn) / (m0 + m1): what AIDABench §3.3.4 reports
    agreement: float | None = None
    agreement_ci: tuple[float, float] | None = None
    by_category: dict[str, Calibration] = Field(default_factory=dict)  # items with a category: the same per category
    n_human_partial: int = 0  # items a person labelled partial: in QWK, not in q0 / q1
    qwk: float | None = None  # quadratic-weighted kappa (QWK_RULE); None with no item or no spread
    qwk_n: int = 0  # the items it is over
    qwk_rule: str = QWK_RULE
    track: str | None = None  # the track of the items, when they are one track's

    def for_score(self, source: str = "the calibration") -> tuple[float, float, int, int]:
        """(q0, q1, m0, m1) for Rogan-Gladen, or a UserError saying what is missing."""
        if self.by_category:
            whose = f"{self.track} " if self.track else ""
            raise UserError(f"{source} calibrates {whose}evaluators ({', '.join(self.by_category)}), one per "
                            "category; the Rogan-Gladen correction needs a calibration of one judge over "
                            "uncategorised items (deskbench calibrate sample on the runs the score is of)")
        if self.q0 is None or self.q1 is None:
            missing = "incorrect" if self.q0 is None else "correct"
            raise UserError(f"{source} has no item a human labelled {missing}; label more items "
                            "(both kinds are needed for q0 and q1)")
        if self.q0 + self.q1 <= 1:
            raise UserError(f"{source}: q0={self.q0:.3f} plus q1={self.q1:.3f} do not exceed 1: a judge no better "
                            "than chance cannot be corrected; use a better judge")
        return self.q0, self.q1, self.m0, self.m1


# -- files -----------------------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def _read(path: Path, model: type[M], fix: str) -> list[tuple[int, M]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; give a JSON Lines file") from None
    rows: list[tuple[int, M]] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((number, model.model_validate_json(line)))
        except ValidationError as exc:
            raise UserError(f"{path}:{number}: {_describe(exc)}; {fix}") from None
    return rows


def read_items(path: Path) -> list[CalibrationItem]:
    rows = _read(path, CalibrationItem, "give the --output file of 'deskbench calibrate sample'")
    seen: set[str] = set()
    for number, item in rows:
        if item.id in seen:
            raise UserError(f"{path}:{number}: field 'id': {item.id!r} appears twice; remove the repeat")
        seen.add(item.id)
    return [item for _, item in rows]


def read_labels(path: Path, items: Iterable[CalibrationItem] | None = None) -> list[HumanLabel]:
    """Labels from JSONL; with `items`, a label of an unknown item is an error naming its line."""
    rows = _read(path, HumanLabel, 'fix the line: {"item_id": ..., "labeller": ..., '
                                   '"label": "correct" | "partial" | "incorrect", "timestamp": ISO 8601}')
    if items is not None:
        known = {i.id for i in items}
        for number, label in rows:
            if label.item_id not in known:
                raise UserError(f"{path}:{number}: field 'item_id': {label.item_id!r} is not an item of the "
                                "items file; label only items of that sample")
    return [label for _, label in rows]


def write_items(path: Path, items: Sequence[CalibrationItem]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("w", encoding="utf-8") as fh:
            for item in items:
                fh.write(item.model_dump_json() + "\n")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; choose another -o path") from None


def read_calibration(path: Path) -> Calibration:
    """The JSON of 'deskbench calibrate compute --json'."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise UserError(f"{path}: no such file; give the JSON of 'deskbench calibrate compute --json'") from None
    try:
        return Calibration.model_validate_json(text)
    except ValidationError as exc:
        raise UserError(f"{path}: {_describe(exc)}; give the JSON of 'deskbench calibrate compute --json'") from None


# -- the q's ---------------------------------------------------------------------------------


def resolve_three_way(labels: Sequence[HumanLabel]) -> tuple[dict[str, Label], int]:
    """item id -> the label its labellers agree on, and the number of items left out because
    labellers disagree. A labeller's latest label of an item replaces their earlier ones."""
    latest: dict[tuple[str, str], HumanLabel] = {}
    for label in labels:
        key = (label.item_id, label.labeller)
        if key not in latest or label.timestamp >= latest[key].timestamp:
            latest[key] = label
    per_item: dict[str, set[Label]] = {}
    for (item_id, _), label in latest.items():
        per_item.setdefault(item_id, set()).add(label.label)
    agreed = {i: next(iter(v)) for i, v in per_item.items() if len(v) == 1}
    return agreed, len(per_item) - len(agreed)


def resolve_labels(labels: Sequence[HumanLabel]) -> tuple[dict[str, bool], int]:
    """item id -> human says correct (items labelled partial left out: q0 and q1 need a yes or
    no), and the number of items left out because labellers disagree."""
    agreed, disagreed = resolve_three_way(labels)
    return {i: label == "correct" for i, label in agreed.items() if label != "partial"}, disagreed


def quadratic_weighted_kappa(a: Sequence[int], b: Sequence[int], k: int = 3) -> float | None:
    """Cohen's kappa with quadratic weights between two raters' ordinal ratings 0 .. k-1 (see the
    module docstring); None with no pair, or when chance predicts no disagreement (one class each)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} ratings against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    observed = [[0.0] * k for _ in range(k)]
    for i, j in zip(a, b, strict=True):
        observed[i][j] += 1
    rows = [sum(observed[i]) for i in range(k)]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    weight = [[(i - j) ** 2 / (k - 1) ** 2 for j in range(k)] for i in range(k)]
    seen = sum(weight[i][j] * observed[i][j] for i in range(k) for j in range(k))
    chance = sum(weight[i][j] * rows[i] * cols[j] / n for i in range(k) for j in range(k))
    return None if chance == 0 else 1 - seen / chance


def _qwk(human: Mapping[str, Label], verdicts: Mapping[str, float | None],
         sources: Mapping[str, str | None]) -> tuple[float | None, int]:
    """QWK over the labelled items with a verdict the judge was asked for (QWK_RULE), and their number."""
    pairs = [(ORDINAL[label], round(2 * v)) for item_id, label in human.items()
             if (v := verdicts.get(item_id)) is not None and sources.get(item_id) != "exact"]
    return quadratic_weighted_kappa([h for h, _ in pairs], [j for _, j in pairs]), len(pairs)


def calibration(
    labels: Sequence[HumanLabel], verdicts: Mapping[str, float | None], *, judge: str | None = None,
    sources: Mapping[str, str | None] | None = None,
) -> Calibration:
    """q1, q0 (with Wilson intervals) and the confusion counts from human labels and the judge's
    verdicts (item id -> 1, 0.5, 0 or None); see the module docstring for the partial rule. QWK
    leaves out the items whose `sources` (item id -> verdict_source) is "exact"."""
    three_way, disagreed = resolve_three_way(labels)
    qwk, qwk_n = _qwk(three_way, verdicts, sources or {})
    tp = fn = tn = fp = 0.0
    m0 = m1 = n_partial = no_verdict = human_partial = 0
    for item_id, label in three_way.items():
        v = verdicts.get(item_id)
        if v is None:
            no_verdict += 1
            continue
        if label == "partial":  # no yes or no for q0 / q1
            human_partial += 1
            continue
        correct = label == "correct"
        n_partial += v == 0.5
        if correct:
            m1 += 1
            tp, fn = tp + v, fn + (1 - v)
        else:
            m0 += 1
            fp, tn = fp + v, tn + (1 - v)
    q1 = tp / m1 if m1 else None
    q0 = tn / m0 if m0 else None
    n = m0 + m1
    return Calibration(
        q1=q1, q0=q0,
        q1_ci=wilson_interval(tp, m1) if m1 else None,
        q0_ci=wilson_interval(tn, m0) if m0 else None,
        agreement=(tp + tn) / n if n else None,
        agreement_ci=wilson_interval(tp + tn, n) if n else None,
        m1=m1, m0=m0, tp=tp, fn=fn, tn=tn, fp=fp, n_partial=n_partial,
        n_labelled=m0 + m1,
        n_unlabelled=len(set(verdicts) - {label.item_id for label in labels}),
        n_no_verdict=no_verdict, n_disagreed=disagreed, judge=judge,
        labellers=sorted({label.labeller for label in labels}),
        n_human_partial=human_partial, qwk=qwk, qwk_n=qwk_n,
    )


def calibration_of(items: Sequence[CalibrationItem], labels: Sequence[HumanLabel]) -> Calibration:
    """The calibration over all items; for items with a category also per category (by_category),
    as each category has its own evaluator."""

    def of(chosen: Sequence[CalibrationItem], chosen_labels: Sequence[HumanLabel]) -> Calibration:
        judges = sorted({i.judge for i in chosen if i.judge})
        return calibration(chosen_labels, {i.id: i.judge_verdict for i in chosen}, judge=", ".join(judges) or None,
                           sources={i.id: i.verdict_source for i in chosen})

    tracks = {i.track for i in items}
    whole = of(items, labels).model_copy(update={"track": tracks.pop() if len(tracks) == 1 else None})
    categories = sorted({i.category for i in items if i.category})
    if not categories:
        return whole
    per = {}
    for cat in categories:
        chosen = [i for i in items if i.category == cat]
        ids = {i.id for i in chosen}
        per[cat] = of(chosen, [lab for lab in labels if lab.item_id in ids])
    return whole.model_copy(update={"by_category": per})


# -- sampling --------------------------------------------------------------------------------


def open_named_runs(run_dirs: Sequence[Path]) -> list[tuple[Path, RunStore]]:
    """The runs' stores; two runs with the same directory name are refused (item ids carry it)."""
    from deskbench.runs.store import RunStore

    names: dict[str, Path] = {}
    out = []
    for run_dir in run_dirs:
        if run_dir.name in names:
            raise UserError(f"two run directories are named {run_dir.name!r} ({names[run_dir.name]}, {run_dir}); "
                            "item ids use the directory name: rename one")
        names[run_dir.name] = run_dir
        out.append((run_dir, RunStore(run_dir, create=False)))
    return out


def _stratum(item: CalibrationItem, judge_verdict: float) -> str:
    verdict = {1.0: "correct", 0.5: "partial", 0.0: "incorrect"}[judge_verdict]
    if item.category is not None:  # each category has its own evaluator: category x evaluator x verdict
        return f"{item.category}/{item.verdict_source}/{verdict}"
    if item.verdict_source == "exact":
        return "exact"
    return verdict


def _allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of n over the strata (largest remainder), at least one each."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quota = {k: n * s / total for k, s in sizes.items()}
    alloc = {k: min(s, max(1, math.floor(quota[k]))) for k, s in sizes.items()}
    order = sorted(sizes, key=lambda k: (-(quota[k] - math.floor(quota[k])), k))
    while sum(alloc.values()) < n:
        grew = False
        for k in order:
            if sum(alloc.values()) < n and alloc[k] < sizes[k]:
                alloc[k] += 1
                grew = True
        if not grew:
            break
    while sum(alloc.values()) > n:  # the at-least-one floor overshot: take from the largest
        k = max((k for k in alloc if alloc[k] > 1), key=lambda k: (alloc[k], k))
        alloc[k] -= 1
    return alloc


def sample_items(items: Sequence[CalibrationItem], n: int = 200, seed: int = 0) -> list[CalibrationItem]:
    """A deterministic sample of n items (all of them if fewer). Items with verdicts are stratified
    by verdict class (proportional allocation, self-weighting); items the judge left unscored are
    not sampled. Without verdicts, a simple random sample. Output is sorted by id."""
    if n < 1:
        raise UserError(f"--n {n} is not valid; use 1 or more")
    rng = random.Random(seed)
    pool = sorted(items, key=lambda i: i.id)
    judged = [i for i in pool if i.verdict_source is not None]
    if not judged:
        return sorted(rng.sample(pool, min(n, len(pool))), key=lambda i: i.id)
    strata: dict[str, list[CalibrationItem]] = {}
    for item in judged:
        if item.judge_verdict is not None:
            strata.setdefault(_stratum(item, item.judge_verdict), []).append(item)
    alloc = _allocate({k: len(v) for k, v in sorted(strata.items())}, n)
    chosen: list[CalibrationItem] = []
    for k in sorted(strata):
        chosen += rng.sample(strata[k], alloc[k])
    return sorted(chosen, key=lambda i: i.id)


def calibration_json(cal: Calibration) -> str:
    return json.dumps(cal.model_dump(mode="json"), indent=2)
