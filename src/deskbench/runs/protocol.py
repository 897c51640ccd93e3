"""Which protocol produced a number: the paper's, or something deskbench adds or falls back to.

Every aggregate deskbench prints (CLI, `--json`, report) carries a list of `ProtocolNote`s, one
per aspect that could differ from the paper (the agent's prompt, an evaluator, a filter), so a
reader never mistakes a fallback's number for the paper's. The run-side notes (prompt additions,
tools) are kept per system in the run store and a resumed run with other notes is refused, as
with model settings; the score-side notes are made by the scorer from its own options.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.runs.store import RunStore

META_KEY = "protocol"
Source = Literal["paper", "deskbench"]


class ProtocolNote(BaseModel):
    """One aspect of how a number was produced: `source` says whose protocol it follows."""

    aspect: str  # "qa evaluator", "agent prompt", ...
    source: Source
    detail: str  # what exactly, with the flag that chose it: "Listing 2 binary judge (--judge gpt-4o)"

    def describe(self) -> str:
        who = "paper" if self.source == "paper" else "deskbench"
        return f"{self.aspect}: {who} ({self.detail})"


def paper(aspect: str, detail: str) -> ProtocolNote:
    return ProtocolNote(aspect=aspect, source="paper", detail=detail)


def deskbench(aspect: str, detail: str) -> ProtocolNote:
    return ProtocolNote(aspect=aspect, source="deskbench", detail=detail)


def describe(notes: Iterable[ProtocolNote]) -> str:
    """One line for the CLI: every aspect, the non-paper ones first so they are not missed."""
    ordered = sorted(notes, key=lambda n: n.source == "paper")
    return "; ".join(n.describe() for n in ordered)


def all_paper(notes: Iterable[ProtocolNote]) -> bool:
    return all(n.source == "paper" for n in notes)


def remember_protocol(store: RunStore, system: str, notes: Sequence[ProtocolNote]) -> None:
    """The run-side protocol of a system, kept with the run. Resuming a system with another
    protocol would mix two under one name: refused with what differs. An aspect only one side
    names is not a difference (a newer deskbench describing one more aspect of the same run)."""
    known = store.meta(META_KEY)
    table: dict[str, object] = dict(known) if isinstance(known, dict) else {}
    new = [n.model_dump(mode="json") for n in notes]
    old = table.get(system)
    if isinstance(old, list) and _conflict(old, new):
        was = describe(ProtocolNote.model_validate(o) for o in old)
        raise UserError(f"{store.dir} already holds a {system} run with protocol [{was}]; this run's is "
                        f"[{describe(notes)}]: use another --out (or the same flags to resume)")
    table[system] = new
    store.set_meta(META_KEY, table)


def _conflict(old: list[Any], new: list[dict[str, Any]]) -> bool:
    """Does an aspect both protocols name differ?"""
    before = {o.get("aspect"): o for o in old if isinstance(o, dict)}
    return any(n["aspect"] in before and before[n["aspect"]] != n for n in new)


def system_protocol(store: RunStore, system: str, scoring: Sequence[ProtocolNote]) -> list[ProtocolNote]:
    """Everything that produced a system's numbers: how it was run (kept with the run), then how
    it was scored (the scorer's options)."""
    return [*stored_protocol(store).get(system, []), *scoring]


def stored_protocol(store: RunStore) -> dict[str, list[ProtocolNote]]:
    """The run-side protocol of each system (runs made before it was kept: none)."""
    known = store.meta(META_KEY)
    if not isinstance(known, dict):
        return {}
    return {system: [ProtocolNote.model_validate(n) for n in notes]
            for system, notes in known.items() if isinstance(notes, list)}
