"""docqa's item outcome, on its own scorer (tracks/docqa/scoring/docqa.py `score_all`, as `deskbench
score RUN` scores a run: attempt-0 episodes, a failed episode scored 0): score = the item's accuracy
(1/0 under ANLS* >= 0.5; 1/0.5/0 with --judge); correct = `ItemScore.correct`, accuracy >= 0.5
(MADQA F.3's binary correctness, what the official Kuiper uses; a judge's "partial" counts as
correct). A judge call that failed leaves the item unscored. Only tasks the system has an episode
for are its tasks (a task it never ran is not wrong, it is not its task).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest

if TYPE_CHECKING:
    from deskbench.tracks.docqa.tasks import ItemScore

DEFINITION = ("score = the item's accuracy (ANLS* >= 0.5 gives 1/0; with --judge 1/0.5/0); correct = accuracy "
              ">= 0.5 (a judge's partial counts); a failed episode scores 0; a failed judge call is unscored")
"""How an item's score and binary outcome are defined, in words (`compare` and its page show it)."""


def docqa_outcomes(items: Sequence[ItemScore], system: str, *, attempt: int = 0,
                   answers: Mapping[str, str] | None = None) -> list[ItemOutcome]:
    """docqa items (tracks/docqa/scoring/docqa.py) as outcomes; a "missing" item (the episode failed) is
    scored 0, as `deskbench score` counts it. `answers`: each task's answer key (docqa_attempts.answer_key)."""
    out = []
    given = answers or {}
    for i in items:
        if i.status == "unscored" or i.accuracy is None:
            out.append(ItemOutcome(task_id=i.id, attempt=attempt, system=system, status="unscored",
                                   answer=given.get(i.id)))
        else:
            out.append(ItemOutcome(task_id=i.id, attempt=attempt, system=system, status="scored",
                                   score=float(i.accuracy), correct=bool(i.correct), answer=given.get(i.id)))
    return out


@contextmanager
def docqa_scorer_options(request: ScorerRequest) -> Iterator[OutcomeOptions]:
    """docqa's scorer from a command's flags: `--judge` (with `--judge-cache`, `--no-cache`) as
    `deskbench score` builds it, else ANLS* >= 0.5."""
    from deskbench.tracks.docqa.options import DocQAScoreOptions
    from deskbench.tracks.docqa.scoring.docqa import ScoreOptions
    from deskbench.tracks.docqa.scoring.llm_judge import make_judge

    o = request.options_as(DocQAScoreOptions)
    answer_judge = (make_judge(request.judge, o.judge_cache, not o.cache, request.concurrency)
                    if request.judge else None)
    yield OutcomeOptions(scorer=ScoreOptions(judge=answer_judge), concurrency=request.concurrency)
