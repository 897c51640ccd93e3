"""pass@k, avg@k and the spread across attempts of a docqa system run with `--attempts K`.

MADQA's metrics (accuracy, Page/Doc F1, Kuiper, bias correction) stay on attempt 0: the
ScoreReport is attempt 0's. This block scores every attempt the same way (ANLS* >= 0.5, or the
judge's raw verdict with --judge) and hands the per-attempt accuracies to scoring/attempts.py,
the one home of pass@k. An episode that ended in an error scores 0 (as in the headline); an
attempt not yet run (a cut-short run) is absent, not wrong, and makes the block incomplete.
"""

from __future__ import annotations

from collections.abc import Sequence

from deskbench.runs.scorings import StoredItem
from deskbench.runs.store import RunStore
from deskbench.scoring.attempts import AttemptMetrics, attempt_metrics
from deskbench.scoring.judge_log import recording
from deskbench.tracks.docqa.episodes import run_submissions
from deskbench.tracks.docqa.humans import episodes_of
from deskbench.tracks.docqa.scoring.docqa import ScoreOptions, score_all
from deskbench.tracks.docqa.tasks import DocQATask


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
    rows: list[tuple[str, int, float | None]] = []
    for attempt in range(k):
        subs, failed = run_submissions(store, system, attempt)
        present = {s.id for s in subs} | set(failed)
        with recording(store if record and attempt > 0 else None, system, attempt):  # attempt 0: recorded by the caller
            items, matched = score_all([t for t in tasks if t.id in present], subs, opts, errors=failed)
        if stored is not None and attempt > 0:  # attempt 0: stored by the caller, from the headline's items
            from deskbench.tracks.docqa.scoring.docqa_items import stored_items

            stored += stored_items(matched.pairs, items, system, attempt)
        rows += [(item.id, attempt, item.accuracy) for item in items]
    return attempt_metrics(rows, k)
