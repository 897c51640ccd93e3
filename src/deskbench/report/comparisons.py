"""The report's "Comparison" sections: `deskbench compare`'s numbers for a track's systems, from
the items its section has already scored (each track's outcomes converter, tracks/<name>/outcomes.py,
turns them into ItemOutcomes, so nothing is scored or judged twice)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deskbench.analysis.compare import (
    Comparison,
    ReliabilityComparison,
    SystemOutcomes,
    compare,
    reliability,
    system_labels,
)
from deskbench.runs.outcomes import ItemOutcome


def by_system(run_items: Sequence[tuple[Path, list[ItemOutcome]]]) -> list[SystemOutcomes]:
    """Outcomes grouped per (run, system), labelled as `compare` labels them (a name found in two
    runs is told apart by its run)."""
    groups: dict[tuple[Path, str], list[ItemOutcome]] = {}
    for run_dir, outcomes in run_items:
        for o in outcomes:
            groups.setdefault((run_dir, o.system), []).append(o)
    keys = list(groups)
    return [SystemOutcomes(label=label, system=s, run_dir=str(d), outcomes=groups[(d, s)])
            for (d, s), label in zip(keys, system_labels(keys), strict=True)]


def compare_several(track: str, method: str, systems: Sequence[SystemOutcomes], *, resamples: int = 1000,
                    seed: int = 0) -> list[Comparison]:
    """A built-in track's Comparison section: one with two systems or more, none with one (its own
    tables already show it). `method`: the track's outcome definition, in words."""
    if len(systems) < 2:
        return []
    return [compare(list(systems), track=track, method=method, resamples=resamples, seed=seed)]


def lone_reliability(systems: Sequence[SystemOutcomes]) -> ReliabilityComparison | None:
    """The reliability across attempts of a section's one system (with two or more, its Comparison
    carries it): pass^k over every task it ran; None when it ran each task once."""
    if len(systems) != 1:
        return None
    return reliability(systems, list(dict.fromkeys(o.task_id for o in systems[0].outcomes)))


def compare_outcomes(track: str, method: str, runs: Sequence[tuple[Path, list[ItemOutcome]]], *,
                     resamples: int = 1000, seed: int = 0) -> Comparison:
    """A track without a report section of its own (one registered by a plugin): its leaderboard
    and, with two systems or more, the pairwise tests, from its outcomes alone."""
    return compare(by_system(runs), track=track, method=method, resamples=resamples, seed=seed)
