"""A track's commands reach `deskbench` through its hooks (contract/cli.py), and the core's command
line names no track (issue 34).

A test track in this file adds a top-level command and a `generate` subcommand through
`Track.cli_commands`, a task set through `Track.scaffolder` and a judge to calibrate through
`Track.judge_calibration`; nothing outside this file is edited for it. The built-in tracks'
commands are the ones `deskbench --help` lists from cli/panels.py's table (so `--help` imports no
track), and the core's command modules import no track."""

from __future__ import annotations

import ast
import json
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from conftest import run_cli
from pydantic import BaseModel
from typer.main import get_command

from deskbench.cli import panels
from deskbench.cli.app import app
from deskbench.contract.cli import (
    DemoContext,
    JudgeCalibration,
    Scaffolded,
    Scaffolder,
    TrackCommand,
)
from deskbench.contract.registry import BUILTIN, register_track, tracks, unregister_track
from deskbench.contract.track import Track
from deskbench.errors import UserError
from deskbench.runs.outcomes import ItemOutcome, OutcomeOptions, ScorerRequest
from deskbench.runs.store import RunStore
from deskbench.runs.track import PreparedRun, RunRequest
from deskbench.scoring.judge_calibration import CalibrationItem

SRC = Path(__file__).resolve().parents[2] / "src" / "deskbench"


class HookTask(BaseModel):
    id: str
    text: str


class HookSubmission(BaseModel):
    id: str
    answer: str


def register_hello(app: typer.Typer) -> None:
    """The test track's top-level command, as a track's cli module registers it."""

    @app.command("hello")
    def hello(name: Annotated[str, typer.Option("--user", help="Whom to greet.")] = "world") -> None:
        """Greet someone (the clihook test track's command)."""
        print(f"hello {name} from the clihook track")


def register_generate(app: typer.Typer) -> None:
    """The test track's `generate clihook`: one task a seed."""

    @app.command("clihook")
    def generate_clihook(out_dir: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")],
                         seed: Annotated[int, typer.Option(help="The seed.")] = 0) -> None:
        """A clihook task set."""
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "tasks.jsonl").write_text(HookTask(id=f"t{seed}", text="hi").model_dump_json() + "\n")
        print(f"wrote 1 task to {out_dir}")


def scaffold_clihook(dest: Path, source: Path | None, *, workers: int,
                     on_file: Callable[[str], None] | None) -> Scaffolded:
    (dest / "tasks.jsonl").write_text(HookTask(id="todo", text="TODO").model_dump_json() + "\n")
    return Scaffolded(tasks=1, files=0, next_command=["deskbench", "run", "--tasks", str(dest / "tasks.jsonl")])


class HookTrack(Track):
    name = "clihook"
    title = "clihook (test track)"
    task_type = HookTask
    submission_type = HookSubmission
    outcome_definition = "never scored: the track is here for its commands"
    agents = ("clihook-agent",)

    def prepare(self, request: RunRequest) -> PreparedRun:
        raise NotImplementedError

    def outcomes(self, store: RunStore, system: str, options: OutcomeOptions) -> list[ItemOutcome]:
        raise NotImplementedError

    def scorer_options(self, request: ScorerRequest) -> AbstractContextManager[OutcomeOptions]:
        raise NotImplementedError

    def cli_commands(self) -> Sequence[TrackCommand]:
        return (TrackCommand("hello", f"{__name__}:register_hello", summary="Greet from the clihook track",
                             panel=panels.TOOLS),
                TrackCommand("clihook", f"{__name__}:register_generate", group="generate"))

    def scaffolder(self) -> Scaffolder:
        return scaffold_clihook

    def judge_calibration(self) -> JudgeCalibration:
        return HookCalibration()


class HookCalibration:
    """The test track's judge: every run holds two items, one the judge called correct."""

    def sample_items(self, run_dirs: Sequence[Path],
                     params: Mapping[str, object]) -> tuple[Sequence[CalibrationItem], Mapping[str, int]]:
        if params.get("category") is not None:
            raise UserError("--category is not the clihook track's; drop it")
        items = [CalibrationItem(id=f"{d.name}/sys/t{i}", task_id=f"t{i}", run=d.name, system="sys",
                                 question=f"q{i}", prediction=[f"a{i}"], judge_verdict=float(i),
                                 verdict_source="judge", judge=str(params.get("judge")))
                 for d in run_dirs for i in (0, 1)]
        return items, {"no prediction": 3}

    def note(self, items: Sequence[CalibrationItem]) -> str | None:
        return "clihook: a verdict is the test judge's"


@pytest.fixture
def hook_track() -> Iterator[HookTrack]:
    track = HookTrack()
    tracks()  # the built-ins first, as a command line loads them
    register_track(track)
    try:
        yield track
    finally:
        unregister_track(track.name)


def _invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """`deskbench ARGS` in this process (the console script's main), where the test track is registered."""
    return run_cli(*args)


def test_a_track_adds_a_top_level_command_through_its_hook(hook_track: HookTrack) -> None:
    result = _invoke("hello", "--user", "ada")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello ada from the clihook track"
    assert "Whom to greet." in _invoke("hello", "--help").stdout  # built with the grammar's classes
    assert "hello" in get_command(app).commands  # type: ignore[attr-defined]
    listed = _invoke("--help").stdout
    assert "hello" in listed and "Greet from the clihook track" in listed  # in its panel, one line


def test_a_track_adds_a_subcommand_to_generate(hook_track: HookTrack, tmp_path: Path) -> None:
    result = _invoke("generate", "clihook", "--out", str(tmp_path / "set"), "--seed", "3")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "set" / "tasks.jsonl").read_text())["id"] == "t3"
    shown = _invoke("generate", "--help").stdout
    order = [name for name in ("docqa", "analytics", "deliverables", "clihook", "demo") if f" {name} " in shown]
    assert order == ["docqa", "analytics", "deliverables", "clihook", "demo"]  # the tracks' first, in order


def test_init_scaffolds_through_the_track_and_names_the_tracks_that_do(hook_track: HookTrack,
                                                                       tmp_path: Path) -> None:
    made = _invoke("init", str(tmp_path / "mine"), "--track", "clihook", "--quiet")
    assert made.returncode == 0, made.stderr
    assert json.loads((tmp_path / "mine" / "tasks.jsonl").read_text())["id"] == "todo"
    assert made.stdout.strip().endswith(f"deskbench run --tasks {tmp_path / 'mine' / 'tasks.jsonl'}")
    refused = _invoke("init", str(tmp_path / "d"), "--track", "deliverables")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "init scaffolds docqa or analytics or clihook" in refused.stderr
    assert not (tmp_path / "d").exists()


class HookDemo:
    """The test track's leg of the bundled demo: one task a seed."""

    def build(self, out: Path, seed: int) -> None:
        out.mkdir(parents=True)
        (out / "tasks.jsonl").write_text(HookTask(id=f"demo{seed}", text="hi").model_dump_json() + "\n")

    def run(self, context: DemoContext) -> Sequence[Path]:
        return []

    def show(self, section: object) -> None:
        pass


def test_the_demo_bundle_is_built_from_every_track_s_leg(hook_track: HookTrack, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`generate demo` builds each track's part of the bundle through `Track.demo`, in a folder
    named after it (the built-in legs left out here: their generators take a while)."""
    from deskbench.generate.demo import build_demo, checksums

    for name in BUILTIN:
        monkeypatch.setattr(type(tracks()[name]), "demo", lambda self: None)
    monkeypatch.setattr(HookTrack, "demo", lambda self: HookDemo(), raising=False)
    sums = build_demo(tmp_path / "demo")
    assert list(sums) == ["clihook/tasks.jsonl"] and sums == checksums(tmp_path / "demo")
    assert json.loads((tmp_path / "demo" / "clihook" / "tasks.jsonl").read_text())["id"] == "demo2026"


def _run_of(track: str, run_dir: Path) -> Path:
    store = RunStore(run_dir)
    store.set_meta("track", track)
    store.close()
    return run_dir


def test_calibrate_samples_a_track_s_items_through_its_hook(hook_track: HookTrack, tmp_path: Path) -> None:
    run = _run_of("clihook", tmp_path / "run")
    items = tmp_path / "items.jsonl"
    made = _invoke("calibrate", "sample", str(run), "--output", str(items), "--num-items", "5", "--judge", "j")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"wrote 2 of 2 items to {items} (0.0: 1, 1.0: 1); 3 left out (no prediction)"
    assert [json.loads(line)["judge"] for line in items.read_text().splitlines()] == ["j", "j"]
    refused = _invoke("calibrate", "sample", str(run), "--output", str(items), "--category", "qa")
    assert refused.returncode == 2 and refused.stderr.strip().endswith("--category is not the clihook track's; drop it")
    other = _invoke("calibrate", "sample", str(_run_of("deliverables", tmp_path / "d")), "--output", str(items))
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1
    assert "judge calibration needs docqa or analytics or clihook runs" in other.stderr


def test_a_command_whose_module_is_missing_is_one_line(hook_track: HookTrack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HookTrack, "cli_commands", lambda self: (TrackCommand("hello", "no_such_module:register"),))
    result = _invoke("hello")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "deskbench hello: its track declares no_such_module:register, which cannot be loaded" in result.stderr


def test_without_the_track_its_command_is_unknown() -> None:
    result = _invoke("hello")
    assert result.returncode == 2 and "No such command" in result.stderr


def test_the_help_lists_the_builtin_tracks_commands_as_their_hooks_declare_them() -> None:
    """`deskbench --help` lists the tracks' commands from their light `deskbench.cli` entry points
    (no track loaded): each is exactly what the track's hook returns, none is a core command, and
    cli/panels.py's table holds the core's alone."""
    from deskbench.plugins import declared, lookup

    group: Any = get_command(app)
    core = set(group.builders)
    assert set(panels.PANEL_OF) == core
    for name in BUILTIN:
        plugin = lookup("cli", name)
        assert name in declared("cli") and plugin is not None
        assert tuple(plugin.value) == tuple(tracks()[name].cli_commands())  # type: ignore[call-overload]
        for command in tracks()[name].cli_commands():
            module, _, function = command.register.partition(":")
            assert module.startswith(f"deskbench.tracks.{name}.")  # each in its own track's folder
            assert command.group in (None, *group.open_groups)
            assert command.name not in core or command.name == command.group  # a family joining a core group
            assert command.group is not None or command.summary


CORE_CLI = [*(SRC / "cli").glob("*.py"), SRC / "scaffold.py", SRC / "generate" / "demo.py"]


@pytest.mark.parametrize("path", CORE_CLI, ids=lambda p: str(p.relative_to(SRC)))
def test_the_core_command_line_imports_no_track(path: Path) -> None:
    """Module level, inside functions and under TYPE_CHECKING alike (tools/layering.py's rule)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("deskbench.tracks")]
    assert found == []
