"""A track with no score table of its own (the echo test track) still gets pass^k from the core
when run with --attempts K: `score` (its line and --json, runs/track_outcomes.py show_scores),
`compare` (the reliability table and the pair tested on every attempt correct) and the report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from echo_track import TRACK, EchoTask
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.registry import register_track, unregister_track

TASKS = [EchoTask(id=f"e{i}", text=text, expected=expected) for i, (text, expected) in enumerate(
    [("abc", "ABC"), ("Mixed", "MIXED"), ("x", "X"), ("Q", "q"), ("hello", "HELLO"), ("lo", "LO")])]


@pytest.fixture
def echo() -> Iterator[None]:
    register_track(TRACK)
    yield
    unregister_track("echo")


def test_pass_hat_for_a_track_without_its_own_tables(echo: None, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in TASKS))
    out = tmp_path / "run"
    ran = CliRunner().invoke(app, ["run", "--tasks", str(tasks), "--agent", "echo-upper", "--agent", "echo-lower",
                                   "--out", str(out), "--quiet", "--attempts", "3"])
    assert ran.exit_code == 0, ran.output
    scored = CliRunner().invoke(app, ["score", str(out), "--json"])
    assert scored.exit_code == 0, scored.output
    rows = json.loads(scored.stdout)
    # the echo agents are deterministic: upper right on 5 of 6 tasks every time, lower on 1 (e3)
    assert {s: (r["k"], r["pass_hat"]) for s, r in rows.items()} == {
        "echo-upper": (3, pytest.approx(5 / 6)), "echo-lower": (3, pytest.approx(1 / 6))}
    assert rows["echo-upper"]["consistency"] is None  # the echo track gives no answers to compare
    text = CliRunner().invoke(app, ["score", str(out)])
    assert "echo-upper: reliability (k=3): pass^3 83.3 over 6 tasks" in " ".join(text.stdout.split())
    compared = CliRunner().invoke(app, ["compare", str(out), "--json"])
    assert compared.exit_code == 0, compared.output
    held = json.loads(compared.stdout)["reliability"]
    (pair,) = held["pairs"]
    assert held["k"] == 3 and sorted((pair["a_only"], pair["b_only"])) == [1, 5] and pair["n_paired"] == 6
    page = tmp_path / "report.html"
    assert CliRunner().invoke(app, ["report", str(out), "--output", str(page)]).exit_code == 0
    assert 'id="comparison-echo-reliability"' in page.read_text(encoding="utf-8")
