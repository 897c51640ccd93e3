"""A run's imported systems (run meta "imported"): systems whose episodes came from a
predictions file (`deskbench import`, tracks/docqa/imported.py), not from `deskbench run`. The
record and its readers are the core's: `report` lists such a system's configuration and the viewer
says where its episodes came from, whatever the track."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from deskbench.runs.store import RunStore

META_KEY = "imported"


class ImportRecord(BaseModel):
    """How an imported system came to be (run meta "imported", one entry a system)."""

    source: str  # the predictions file, absolute path
    sha256: str
    tasks_file: str
    imported_at: str
    rows: int  # predictions read
    episodes: int  # predictions that matched a task: one episode each
    errors: int  # of which error rows (status "error")
    unmatched: list[str]  # predictions that match no task: id, or the start of the question
    missing: int  # tasks without a prediction (scored as missing)


def imported_systems(store: RunStore) -> dict[str, ImportRecord]:
    """The run's imported systems and where each came from."""
    raw = store.meta(META_KEY)
    if not isinstance(raw, dict):
        return {}
    return {name: ImportRecord.model_validate(value) for name, value in raw.items()}


def imported_label(system: str) -> str:
    return f"{system} (imported)"


def settings_rows(store: RunStore, run: str) -> list[Any]:  # -> list[report.models.ModelSettingsRow]
    """The report's configuration rows of a run's imported systems: no model, where they came from."""
    from deskbench.report.models import ModelSettingsRow

    return [ModelSettingsRow(run=run, system=name, model="none (imported predictions)", role="imported",
                             sent=f"predictions file {r.source} (sha256 {r.sha256[:12]}), imported {r.imported_at}",
                             note=f"{r.episodes} of {r.rows} predictions matched a task ({r.errors} error rows); "
                                  f"{r.missing} tasks without a prediction count as missing")
            for name, r in imported_systems(store).items()]
