"""The report's "Comparison" sections: `deskbench compare`'s numbers for each track with two or
more systems, from the items the report has already scored (runs/outcomes.py converts them, so
nothing is scored or judged twice)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deskbench.analysis.compare import Comparison, SystemOutcomes, compare, system_labels
from deskbench.runs.outcomes import ItemOutcome
from deskbench.tasks.docqa import ItemScore
from deskbench.tracks.analytics.outcomes import analytics_outcomes
from deskbench.tracks.analytics.scoring.analytics import AnalyticsItemScore
from deskbench.tracks.deliverables.outcomes import deliverables_outcomes
from deskbench.tracks.deliverables.scoring.deliverables import DeliverableItemScore
from deskbench.tracks.docqa.outcomes import docqa_outcomes
from deskbench.tracks.registry import get_track


@dataclass
class DocqaScored:
    """One docqa system as the report scored it: its label there, and the tasks it ran."""

    label: str
    system: str
    run_dir: Path
    items: list[ItemScore]
    ran: set[str]  # tasks with an attempt-0 episode


def _by_system(run_items: Sequence[tuple[Path, list[ItemOutcome]]]) -> list[SystemOutcomes]:
    groups: dict[tuple[Path, str], list[ItemOutcome]] = {}
    for run_dir, outcomes in run_items:
        for o in outcomes:
            groups.setdefault((run_dir, o.system), []).append(o)
    keys = list(groups)
    return [SystemOutcomes(label=label, system=s, run_dir=str(d), outcomes=groups[(d, s)])
            for (d, s), label in zip(keys, system_labels(keys), strict=True)]


def build_comparisons(docqa: Sequence[DocqaScored] = (),
                      analytics: Sequence[tuple[Path, list[AnalyticsItemScore]]] = (),
                      deliverables: Sequence[tuple[Path, list[DeliverableItemScore]]] = (), *,
                      reviewed_only: bool = False, resamples: int = 1000, seed: int = 0) -> list[Comparison]:
    """One comparison per track with at least two systems, in the order docqa, analytics,
    deliverables. docqa systems keep the report's labels (pooled humans included)."""
    tracks: list[tuple[str, list[SystemOutcomes]]] = [
        ("docqa", [SystemOutcomes(label=s.label, system=s.system, run_dir=str(s.run_dir),
                                  outcomes=docqa_outcomes([i for i in s.items if i.id in s.ran], s.label))
                   for s in docqa]),
        ("analytics", _by_system([(d, analytics_outcomes(items)) for d, items in analytics])),
        ("deliverables", _by_system([(d, deliverables_outcomes(items, reviewed_only=reviewed_only))
                                     for d, items in deliverables])),
    ]
    return [compare(systems, track=track, method=get_track(track).outcome_definition, resamples=resamples, seed=seed)
            for track, systems in tracks if len(systems) >= 2]


def compare_outcomes(track: str, runs: Sequence[tuple[Path, list[ItemOutcome]]], *, resamples: int = 1000,
                     seed: int = 0) -> Comparison:
    """A track without a report section of its own (one registered by a plugin): its leaderboard
    and, with two systems or more, the pairwise tests, from its outcomes alone."""
    return compare(_by_system(runs), track=track, method=get_track(track).outcome_definition,
                   resamples=resamples, seed=seed)
