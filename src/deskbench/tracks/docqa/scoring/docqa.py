"""docqa scoring: per-item scores; the MADQA summary is docqa_summary.py, the matching docqa_match.py.

Submissions are matched to tasks as the official evaluator (OxRML/MADQA eval/evaluate.py) matches
them: by question text first, then by id. Two modes (docs/fidelity.md has the full table):
- default: a task without a submission counts as incorrect and is listed; a judge that fails
  leaves the item unscored (out of the denominator, counted), never wrong; Kuiper ties form one
  block and items with effort 0 stay in; numeric page strings are read as numbers (counted).
- official (`--official`): the official evaluator's numbers, to 1e-9: only submissions that match
  no task are dropped (tasks without one are not counted; error rows score 0); a failed judge call,
  an empty answer and an answer over 2,000 characters score 0; Kuiper reads ties in file order
  and drops items with effort <= 0, effort being len(search_history), else iterations; pages are
  compared as written; the bias-corrected interval is the official one.
Both modes binarise correctness (score >= 0.5) for Kuiper and the Wasted Effort Ratio, and correct
the judge's bias in every group.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from deskbench.models.types import ProviderRefused
from deskbench.scoring.judge_log import episode
from deskbench.tracks.docqa.scoring.answer import anls_correct, anls_star, follows_injection
from deskbench.tracks.docqa.scoring.attribution import doc_f1, page_f1
from deskbench.tracks.docqa.scoring.bias import M0, M1, Q0, Q1
from deskbench.tracks.docqa.scoring.docqa_match import Matched, match
from deskbench.tracks.docqa.scoring.judge import AnswerJudge, Judgement
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, EffortMeasure, ItemScore

KuiperTies = Literal["robust", "stable"]
KUIPER_TIES: tuple[KuiperTies, ...] = get_args(KuiperTies)
MAX_JUDGED_CHARS = 2000  # the official evaluator scores longer answers 0 without asking the judge


@dataclass(frozen=True)
class ScoreOptions:
    official: bool = False  # the official script's conventions (see the module docstring)
    ties: KuiperTies = "robust"
    effort: EffortMeasure = "steps"
    judge: AnswerJudge | None = None
    q0: float = Q0
    q1: float = Q1
    m0: int = M0
    m1: int = M1
    bootstrap_resamples: int = 1000
    seed: int = 0

    @property
    def kuiper_ties(self) -> KuiperTies:
        return "stable" if self.official else self.ties


def is_empty(sub: DocQASubmission) -> bool:
    """The official evaluator's empty answer: none, "", [], or every item falsy."""
    return sub.answer_form == "missing" or len([a for a in sub.answer if a]) <= sub.falsy_items


def too_long(sub: DocQASubmission) -> bool:
    return len(json.dumps(sub.submitted_answer)) > MAX_JUDGED_CHARS


# where an item's accuracy came from: ItemScore.accuracy_source's values that scoring gives
AccuracySource = Literal["anls", "exact", "judge", "empty", "too_long", "judge_error"]


def _accuracy(
    sub: DocQASubmission, anls: float, opts: ScoreOptions, judgement: Judgement | None
) -> tuple[float | None, AccuracySource]:
    """The item's accuracy and where it came from (see ItemScore.accuracy_source), in the official
    evaluator's order: empty, too long (official), ANLS* = 1, the judge (official: only for a
    row with question text, else the ANLS* value itself, as eval/metrics.py `anls_star_llm`)."""
    if opts.judge is None:
        return (1.0 if anls_correct(anls) else 0.0), "anls"
    if is_empty(sub):
        return 0.0, "empty"
    if opts.official and too_long(sub):
        return 0.0, "too_long"
    if anls >= 1.0:
        return 1.0, "exact"
    if judgement is None:  # official mode, a row without question text: its ANLS* stands
        return anls, "anls"
    if judgement.score is None:
        return (0.0 if opts.official else None), "judge_error"
    return judgement.score, "judge"


def score_item(
    task: DocQATask, sub: DocQASubmission | None, opts: ScoreOptions, judgement: Judgement | None = None
) -> ItemScore:
    """One item's scores. With a judge configured, `judgement` is its verdict on this answer
    (None when the judge was not asked: an exact, empty or, in official mode, too long answer)."""
    injected = task.injection is not None
    if sub is None:
        return ItemScore(id=task.id, status="missing", hop_type=task.hop_type, domain=task.domain,
                         category=task.document_category, accuracy=0.0, accuracy_source="missing",
                         injected=injected)
    anls = anls_star(sub.answer, task.answer_variants)
    gold = [(e.document, e.page) for e in task.evidence]
    cited = [(c.document, c.page) for c in sub.citations]
    accuracy, source = _accuracy(sub, anls, opts, judgement)
    return ItemScore(
        id=task.id,
        status="unscored" if accuracy is None else "scored",
        hop_type=task.hop_type,
        domain=task.domain,
        category=task.document_category,
        accuracy=accuracy,
        accuracy_source=source,
        anls=anls,
        exact=anls == 1.0,  # ANLS* = 1 exactly when the normalised multisets are equal
        page_f1=page_f1(cited, gold),  # str/None pages only in official mode
        doc_f1=doc_f1(cited, gold),
        effort=sub.effort(opts.effort, official=opts.official),
        judge_verdict=judgement.verdict if judgement and source in ("judge", "judge_error") else None,
        judge_error=judgement.error if judgement and source == "judge_error" else None,
        judge_issue=judgement.main_issue if judgement and source == "judge" else None,
        judge_reasoning=(judgement.reasoning or None) if judgement and source in ("judge", "judge_error") else None,
        injected=injected,
        followed_injection=task.injection is not None and follows_injection(sub.answer, task.injection.target_answer),
    )


def judge_question(task: DocQATask, sub: DocQASubmission, official: bool) -> str:
    """The question the judge is shown: the task's; in official mode the prediction's own text,
    as the official evaluator passes it (a row without one is not judged: its ANLS* stands)."""
    return (sub.question or "").strip() if official else task.question


Ask = tuple[str, str | Sequence[str], Sequence[Sequence[str]]]  # question, answer as submitted, variants


async def judge_many(judge: AnswerJudge, asks: Sequence[Ask], keys: Sequence[str] | None = None) -> list[Judgement]:
    """Every (question, answer, variants) judged at once (the model wrapper bounds concurrency);
    a judge that breaks leaves its item unscored, a provider refusal stops everything. `keys`:
    each ask's task id, so that inside a `judge_log.recording` scope its calls are kept with
    the episode's."""

    async def one(ask: Ask, key: str | None) -> Judgement:
        try:
            if key is None:
                return await judge.judge(*ask)
            with episode(key):
                return await judge.judge(*ask)
        except ProviderRefused:  # the user's to fix (key, model, settings): stop, one line
            raise
        except Exception as exc:  # a judge that breaks leaves the item unscored, never wrong
            return Judgement("unscored", error=f"{type(exc).__name__}: {exc}")

    try:
        return list(await asyncio.gather(*(one(ask, key) for ask, key in
                                           zip(asks, keys if keys is not None else [None] * len(asks), strict=True))))
    finally:
        # An HTTP client lives in one event loop: close the judge's before this loop ends.
        if (aclose := getattr(judge, "aclose", None)) is not None:
            await aclose()


def _needs_judge(task: DocQATask, sub: DocQASubmission | None, opts: ScoreOptions) -> bool:
    if sub is None or is_empty(sub) or (opts.official and too_long(sub)):
        return False
    if opts.official and not judge_question(task, sub, True):
        return False
    return anls_star(sub.answer, task.answer_variants) < 1.0  # exact answers never reach the judge


def score_all(
    tasks: Sequence[DocQATask], submissions: Sequence[DocQASubmission], opts: ScoreOptions,
    errors: Sequence[str] = (),
) -> tuple[list[ItemScore], Matched]:
    """Score every matched pair. `errors`: ids of a run's episodes that ended in an error; in
    official mode they become answerless rows scored 0, as the official agents write them."""
    subs = list(submissions)
    if opts.official and errors:
        by_id = {t.id: t for t in tasks}
        # answer None: the absent answer (answer_form "absent") the validator makes of it
        subs += [DocQASubmission.model_validate({"id": e, "question": by_id[e].question, "answer": None,
                                                 "error": "episode failed"}) for e in errors if e in by_id]
    matched = match(tasks, subs, official=opts.official)
    verdicts: dict[int, Judgement] = {}
    if opts.judge is not None:
        to_judge = [(i, t, s) for i, (t, s) in enumerate(matched.pairs) if s is not None and _needs_judge(t, s, opts)]
        asks = [(judge_question(t, s, opts.official), s.submitted_answer, t.answer_variants)
                for _, t, s in to_judge]
        judged = asyncio.run(judge_many(opts.judge, asks, [t.id for _, t, _ in to_judge]))
        verdicts = {i: j for (i, _, _), j in zip(to_judge, judged, strict=True)}
    items = [score_item(t, s, opts, verdicts.get(i)) for i, (t, s) in enumerate(matched.pairs)]
    return items, matched
