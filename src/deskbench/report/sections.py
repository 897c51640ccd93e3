"""What a track uses to make its report section (`Track.report_section`): the default section of
a track with nothing of its own (its leaderboard and pairwise tests from its outcomes) and the
model settings rows of the judges a section called.

This module imports no track at module level (tracks import it); `Track` is a type only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deskbench.models.settings import ResolvedSettings
from deskbench.report.comparisons import compare_outcomes
from deskbench.report.models import ModelSettingsRow, ReportSection
from deskbench.runs.outcomes import OutcomeOptions

if TYPE_CHECKING:
    from deskbench.contract.track import Track
    from deskbench.runs.store import RunStore


def outcomes_section(track: Track, stores: Sequence[RunStore], options: OutcomeOptions) -> ReportSection:
    """The section of a track that has no tables of its own: every system's outcomes (`track.outcomes`
    on `options`, every attempt) make its Comparison: a leaderboard and, with two systems or more,
    the pairwise tests. A fourth track's `report_section` can simply return this."""
    runs = [(store.dir, [o for name in store.systems() for o in track.outcomes(store, name, options)])
            for store in stores]
    comparison = compare_outcomes(track.name, track.outcome_definition, runs)
    return ReportSection(track=track.name, title=track.title, n_systems=len(comparison.systems),
                         comparisons=[comparison])


def settings_row(s: ResolvedSettings, run: str, system: str) -> ModelSettingsRow:
    """One model's settings as the Model settings table shows them."""
    return ModelSettingsRow(run=run, system=system, model=s.model, role=s.role, sent=s.describe(),
                            dropped=s.dropped, note=s.capability_note)


def judge_settings(models: Sequence[tuple[str, object]]) -> list[ModelSettingsRow]:
    """The judges a section called (role, model or None), with what they were sent; a model without
    resolved settings (a test's fake) has no row."""
    rows = []
    for what, model in models:
        settings = getattr(model, "settings", None)
        if isinstance(settings, ResolvedSettings):
            rows.append(settings_row(settings, "", what))
    return rows
