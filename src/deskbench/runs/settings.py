"""The model settings each system of a run was sent, kept in the run store: the report shows
them, and a run resumed with other settings is refused rather than mixing two configurations
under one system name."""

from __future__ import annotations

from deskbench.errors import UserError
from deskbench.models.resilient import ResilientModel
from deskbench.models.settings import ResolvedSettings
from deskbench.runs.store import RunStore

META_KEY = "model_settings"


def remember_settings(store: RunStore, system: str, model: ResilientModel) -> None:
    """The settings a system's model is sent, kept with the run (the report shows them). A run
    resumed with other settings would mix two configurations under one name: refused."""
    if model.settings is None:
        return
    known = store.meta(META_KEY)
    table: dict[str, object] = dict(known) if isinstance(known, dict) else {}
    new = model.settings.model_dump(mode="json")
    old = table.get(system)
    if isinstance(old, dict) and old.get("sent") != new["sent"]:
        was = ResolvedSettings.model_validate(old).describe()
        raise UserError(f"{store.dir} already holds a {system} run with {was}; these settings are "
                        f"{model.settings.describe()}: use another --out (or the same settings to resume)")
    table[system] = new
    store.set_meta(META_KEY, table)


def stored_settings(store: RunStore) -> dict[str, ResolvedSettings]:
    """The model settings of each system of a run (runs made before settings were kept: none)."""
    known = store.meta(META_KEY)
    if not isinstance(known, dict):
        return {}
    return {system: ResolvedSettings.model_validate(value) for system, value in known.items()}
