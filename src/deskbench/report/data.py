"""The report over run directories: each run opened and checked, the runs grouped by track, and
each track's section computed by the track (`Track.report_section`, on the scorer its
`scorer_options` builds from the report's flags), then assembled with the runs' model settings.

A track is found through the registry when the report is built: this module imports no track."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from deskbench.errors import UserError
from deskbench.paths import require_run
from deskbench.report.models import ModelSettingsRow, Report, ReportSection
from deskbench.report.sections import outcomes_section, settings_row
from deskbench.runs.imported import settings_rows as imported_settings
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.settings import stored_settings
from deskbench.runs.store import RunStore


def _open(run_dir: Path) -> RunStore:
    require_run(run_dir)  # a typo names the runs nearby
    return RunStore(run_dir, create=False)


def build_report(run_dirs: Sequence[Path], options: Mapping[str, OutcomeOptions] | None = None, *,
                 judge: str | None = None, concurrency: int = 8, **params: object) -> Report:
    """The report over `run_dirs` (a directory given twice is one run): one section per track
    among them, in the registry's order of tracks (built-ins first), whatever the order of the
    directories, so the same runs make the same page.

    `judge`, `concurrency` and `params`, the `report` command's other parameters by name
    (pool_humans, corpus, reviewed_only, ...): each track builds its scorer from --judge and its
    score options among them, validated (runs/track_outcomes.py scorer_request; judges closed
    when its section is done), and its section reads the ones it takes; others are unused. `options`:
    a track's scorer already built, by track name (a caller holding its own judges, a test's fake),
    used instead of building one."""
    from deskbench.contract.registry import get_track, tracks
    from deskbench.runs.track_outcomes import scorer_request

    if not run_dirs:
        raise UserError("give at least one run directory")
    run_dirs = list({d.resolve(): d for d in run_dirs}.values())
    stores: list[RunStore] = []
    settings: list[ModelSettingsRow] = []
    sections: list[ReportSection] = []
    try:
        for run_dir in run_dirs:
            store = _open(run_dir)
            stores.append(store)
            settings += [settings_row(s, str(run_dir), system) for system, s in stored_settings(store).items()]
            settings += imported_settings(store, str(run_dir))
            if not store.systems():
                raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
            get_track(store.track())  # a run of a track that is not registered: the user's to fix
        params = {"judge": judge, "concurrency": concurrency, **params}  # what a track's section reads
        present = {store.track() for store in stores}
        scoring = {name: scorer_request(track, params, judge=judge, concurrency=concurrency)  # a bad value: before any judging
                   for name, track in tracks().items() if name in present and (options is None or name not in options)}
        for name, track in tracks().items():
            if name not in present:
                continue
            of_track = [store for store in stores if store.track() == name]
            if options is not None and name in options:
                sections.append(track.report_section(of_track, options[name], params)
                                or outcomes_section(track, of_track, options[name]))
                continue
            with track.scorer_options(scoring[name]) as built:
                sections.append(track.report_section(of_track, built, params) or outcomes_section(track, of_track, built))
    finally:
        for store in stores:
            store.close()
    return Report(run_dirs=[str(d) for d in run_dirs], sections=sections, model_settings=settings)
