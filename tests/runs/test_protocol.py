"""The protocol record: which protocol produced a number, kept per system in the run store."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbench.errors import UserError
from deskbench.runs.protocol import (
    all_paper,
    describe,
    deskbench,
    paper,
    remember_protocol,
    stored_protocol,
)
from deskbench.runs.store import RunStore


def test_describe_puts_deskbench_aspects_first() -> None:
    notes = [paper("agent prompt", "Listing 1"), deskbench("round-limit note", "--last-round-note")]
    line = describe(notes)
    assert line.index("round-limit note: deskbench") < line.index("agent prompt: paper")
    assert not all_paper(notes) and all_paper(notes[:1])


def test_protocol_is_kept_per_system_and_a_different_resume_is_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    plain = [paper("agent prompt", "§3.2")]
    hinted = [deskbench("agent prompt", "trap hints (--trap-hints)")]
    remember_protocol(store, "a", plain)
    remember_protocol(store, "b", hinted)
    remember_protocol(store, "a", plain)  # the same protocol resumes
    assert stored_protocol(RunStore(tmp_path / "run")) == {"a": plain, "b": hinted}
    with pytest.raises(UserError, match="trap hints.*another --out"):
        remember_protocol(store, "a", hinted)
    assert stored_protocol(store)["a"] == plain  # the refused one changed nothing


def test_a_note_a_newer_version_adds_resumes_but_a_changed_one_does_not(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    remember_protocol(store, "a", [paper("agent prompt", "§3.2")])  # stored by an older deskbench
    newer = [paper("agent prompt", "§3.2"), deskbench("decoding", "no preset (--decoding)")]
    remember_protocol(store, "a", newer)  # one more aspect described: the same run
    assert stored_protocol(store)["a"] == newer
    with pytest.raises(UserError, match="another --out"):
        remember_protocol(store, "a", [paper("agent prompt", "§3.2"), paper("decoding", "aida")])
