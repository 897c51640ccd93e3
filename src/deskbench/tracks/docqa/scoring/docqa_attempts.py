"""pass@k, avg@k, pass^k and the spread across attempts of a docqa system run with `--attempts K`.

MADQA's metrics (accuracy, Page/Doc F1, Kuiper, bias correction) stay on attempt 0: the
ScoreReport is attempt 0's. This block scores every attempt the same way (ANLS* >= 0.5, or the
judge's raw verdict with --judge) and hands the per-attempt accuracies to scoring/attempts.py,
the one home of pass@k. An episode that ended in an error scores 0 (as in the headline); an
attempt not yet run (a cut-short run) is absent, not wrong, and makes the block incomplete.
A success (pass^k) is the item's `correct` (accuracy >= 0.5, MADQA F.3); two attempts agree when
their normalised answers do (`answer_key`: ANLS*'s normalisation, a list as a set; no answer "").
"""

from __future__ import annotations

from collections.abc import Sequence

from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions
from deskbench.runs.scorings import StoredItem
from deskbench.runs.store import RunStore
from deskbench.scoring.attempts import Attempt, AttemptMetrics, attempt_metrics
from deskbench.scoring.judge_log import recording
from deskbench.tracks.docqa.episodes import run_submissions
from deskbench.tracks.docqa.humans import episodes_of
from deskbench.tracks.docqa.scoring.answer import normalize_answer
from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all
from deskbench.tracks.docqa.scoring.docqa_match import Matched
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, ItemScore


def answer_key(sub: DocQASubmission | None) -> str:
    """An answer as two attempts are compared: each part normalised as ANLS* normalises it, the
    parts as a sorted set (ANLS* matches a list's parts in any order); "" for no answer."""
    if sub is None:
        return ""
    return " | ".join(sorted({normalize_answer(a) for a in sub.answer}))


def answers_of(matched: Matched) -> dict[str, str]:
    """Each task's answer key (a failed episode's: ""), as scored in `matched`."""
    return {t.id: answer_key(s) for t, s in matched.pairs}


def stored_answers(store: RunStore, system: str, attempt: int = 0) -> dict[str, str]:
    """Each task's answer key in one attempt of `system` (a failed episode's: ""), read from the
    store without scoring (the report has attempt 0's items already)."""
    subs, failed = run_submissions(store, system, attempt)
    return {**dict.fromkeys(failed, ""), **{s.id: answer_key(s) for s in subs if s.id is not None}}


def stored_attempts(store: RunStore, system: str) -> int:
    """k: the most attempts any task of `system` has in the store (1 for a run without --attempts)."""
    return max((ep.attempt + 1 for ep in episodes_of(store, system)), default=1)


def docqa_attempts(store: RunStore, system: str, tasks: Sequence[DocQATask], opts: ScoreOptions, *,
                   record: bool = False, stored: list[StoredItem] | None = None) -> AttemptMetrics | None:
    """The attempts block of one system over `tasks`; None when it was run once per task.
    `record`: keep the judge's calls in the store (`score` does; the report and compare do not).
    `stored`: the items of attempts after the first are added to it (what `score` stores)."""
    k = stored_attempts(store, system)
    if k < 2:
        return None
    rows = [Attempt(o.task_id, o.attempt, o.score, o.correct, o.answer)
            for o in attempt_outcomes(store, system, tasks, opts, record=record, stored=stored)]
    return attempt_metrics(rows, k)


def attempt_outcomes(store: RunStore, system: str, tasks: Sequence[DocQATask], opts: ScoreOptions, *,
                     first: int = 0, record: bool = False, stored: list[StoredItem] | None = None) -> list[ItemOutcome]:
    """Every attempt from `first` of `system`, scored as attempt 0 is (see `docqa_attempts`), as
    outcomes with their answer keys."""
    from deskbench.tracks.docqa.outcomes import docqa_outcomes

    out: list[ItemOutcome] = []
    for attempt in range(first, stored_attempts(store, system)):
        subs, failed = run_submissions(store, system, attempt)
        present = {s.id for s in subs} | set(failed)
        with recording(store if record and attempt > 0 else None, system, attempt):  # attempt 0: recorded by the caller
            items, matched = score_all([t for t in tasks if t.id in present], subs, opts, errors=failed)
        if stored is not None and attempt > 0:  # attempt 0: stored by the caller, from the headline's items
            from deskbench.tracks.docqa.scoring.docqa_items import stored_items

            stored += stored_items(matched.pairs, items, system, attempt)
        out += docqa_outcomes(_one_per_task(items), system, attempt=attempt, answers=answers_of(matched))
    return out


def _one_per_task(items: Sequence[ItemScore]) -> list[ItemScore]:
    """The last item of each task (--official scores every row of a task answered twice)."""
    return list({i.id: i for i in items}.values())


def docqa_run_outcomes(store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
    """`Track.outcomes` of docqa (tracks/docqa/outcomes.py says how an item scores): attempt 0 as
    `deskbench score` scores it, then every later attempt of a run with --attempts K (compare's
    leaderboard reads attempt 0, its reliability every attempt)."""
    from deskbench.tracks.docqa.humans import tasks_scored
    from deskbench.tracks.docqa.outcomes import docqa_outcomes

    subs, failed = run_submissions(store, system)  # attempt 0, as `deskbench score`
    ran = {s.id for s in subs if s.id is not None} | set(failed)
    tasks = [t for t in tasks_scored(system, store.tasks_of(DocQATask), ran) if t.id in ran]
    scorer = options.scorer if isinstance(options.scorer, ScoreOptions) else ScoreOptions()
    items, matched = score_all(tasks, subs, scorer, errors=failed)
    later = attempt_outcomes(store, system, store.tasks_of(DocQATask), scorer, first=1)
    return docqa_outcomes(items, system, answers=answers_of(matched)) + later
