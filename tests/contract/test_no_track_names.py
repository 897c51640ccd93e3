"""Issue 34, item 1: every table keyed by a track's name in the core goes. The built-in tracks are
found as a plugin's are (the `deskbench.tracks` entry points of deskbench's own pyproject.toml,
ordered by `Track.order`); a track's commands and their `--help` panel come from its
`cli_commands` hook, a plugin's listed in the top-level help too; its `deskbench demo` flags from
its demo leg. What is left of the tracks' names in the core is the allow-list below, each with
why it stays."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO
from echo_track import TRACK
from echo_track.demo import LEG as ECHO_LEG
from typer.testing import CliRunner

import deskbench
from deskbench.cli import app
from deskbench.contract import formats
from deskbench.contract.registry import BUILTIN, register_track, tracks, unregister_track
from deskbench.errors import UserError

SRC = Path(deskbench.__file__).resolve().parent

# (core module, track name) -> (how many times the name is a string literal there, why it stays)
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("runs/store.py", "docqa"): (2, "a run stored before runs recorded their track, and a store with no task yet, "
                                   "is docqa's: the only track there was (RunStore.track, save_tasks)"),
    ("scoring/judge_calibration.py", "docqa"): (1, "CalibrationItem.track's default: items files written before "
                                                  "another track had items load as they are"),
    ("plugins.py", "docqa"): (2, "a plugin agent without a `track` attribute is docqa's (plugins written before "
                                 "there were other tracks; deskbench/plugins.py docstring)"),
    ("agents/plugin_calls.py", "docqa"): (1, "the same default as plugins.py agent_track, where the agent is built"),
    ("cli/init.py", "docqa"): (1, "`init --track`'s default, shown in its help and the README (a task set over "
                                  "your own PDFs); the scaffolding itself is the track's (Track.scaffolder)"),
    ("cli/demo.py", "docqa"): (1, "the demo's closing line runs the example plugin agent, a docqa agent, on the "
                                  "bundled docqa questions"),
    ("cli/demo.py", "deliverables"): (1, "the demo's closing line says where the bundled deliverables packages are"),
    # Generated from the tracks' option models by `python -m deskbench.cli.track_flags` (kept equal by
    # tests/contract/test_track_typed_options.py) and read only while no track is loaded, so `run --help`
    # starts without pydantic or a track: loading the three tracks would triple its start-up CPU time.
    **{("cli/track_flags_builtin.py", name): (3, "generated: the built-in tracks' run/score/compare flags")
       for name in ("docqa", "analytics", "deliverables")},
}


def _literals(path: Path, names: set[str]) -> Counter[str]:
    """The string constants of a module that are exactly a track's name (f-string parts too)."""
    found: Counter[str] = Counter()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found[node.value] += 1
    return found


def test_no_core_module_names_a_track_but_the_allowed_ones() -> None:
    names = set(BUILTIN)
    assert names == {"docqa", "analytics", "deliverables"}  # the scan below means something
    found: dict[tuple[str, str], int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("tracks/"):
            continue
        for name, count in _literals(path, names).items():
            found[(rel, name)] = count
    unexpected = {key: n for key, n in found.items() if key not in ALLOWED}
    assert not unexpected, f"a track's name as a literal in the core (give the track a hook instead): {unexpected}"
    assert {key: n for key, n in found.items()} == {key: n for key, (n, _) in ALLOWED.items()}, \
        "the allow-list is out of date: a name it allows is gone (remove it) or appears more often"


def test_the_builtin_tracks_are_entry_points_in_the_order_they_declare() -> None:
    from deskbench.plugins import builtin_entry_points

    own = builtin_entry_points("tracks")
    assert set(own) == set(BUILTIN) == {name for name, t in tracks().items() if type(t).__module__.startswith("deskbench.")}
    assert list(BUILTIN) == sorted(BUILTIN, key=lambda n: tracks()[n].order)
    assert list(BUILTIN) == ["docqa", "analytics", "deliverables"]  # `deskbench list tracks` as before
    assert not hasattr(formats, "BUILTIN")


def test_a_track_that_says_no_order_comes_after_the_builtins(echo: None) -> None:
    assert "order" not in vars(type(TRACK))
    assert list(tracks())[-1] == "echo" and list(tracks())[:3] == list(BUILTIN)


@pytest.fixture
def echo() -> Iterator[None]:
    register_track(TRACK)
    yield
    unregister_track("echo")


def _site(tmp_path: Path, entry_points: str) -> dict[str, str]:
    """tests/echo_track installed as a distribution (a .dist-info on the path) declaring `entry_points`."""
    info = tmp_path / "site" / "deskbench_echo_track-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deskbench-echo-track\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "tests")]),
            "COLUMNS": "100", "TERM": "dumb"}


def _tools_panel(help_text: str) -> list[str]:
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if "─ Tools ─" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("╰"))
    return [line.strip("│ ").split(" ")[0] for line in lines[start + 1:end]]


@pytest.mark.parametrize("declared", ["tracks", "tracks and cli"])
def test_an_installed_plugin_track_s_command_is_in_the_top_level_help(tmp_path: Path, declared: str) -> None:
    """Whether the plugin declares its commands for `--help` (`deskbench.cli`) or only its track
    (then the tracks are loaded for the help), its command is listed where it says, and runs."""
    entry_points = "[deskbench.tracks]\necho = echo_track:TRACK\n"
    if declared == "tracks and cli":
        entry_points += "\n[deskbench.cli]\necho = echo_track.cli:COMMANDS\n"
    env = _site(tmp_path, entry_points)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "deskbench", *args], capture_output=True, text=True,
                              timeout=300, env=env, cwd=tmp_path)

    shown = cli("--help")
    assert shown.returncode == 0, shown.stderr
    # after sandbox, as compare-sheets: the track listed first (analytics: order 20 < echo's 100) first
    assert _tools_panel(shown.stdout) == ["mcp", "sandbox", "compare-sheets", "echo-say", "verify"]
    assert "Say a text as the echo agents answer it" in shown.stdout
    said = cli("echo-say", "hello")
    assert said.returncode == 0 and said.stdout.strip() == "HELLO"
    listed = {r["name"]: r["origin"] for r in json.loads(cli("list", "tracks", "--json").stdout)}
    assert listed["docqa"] == "built-in" and "deskbench-echo-track" in listed["echo"]


def test_the_top_level_help_reads_the_builtin_tracks_commands_without_loading_a_track() -> None:
    """`-X importtime` does not see modules imported by importlib (entry points): sys.modules does."""
    code = ("import sys\nfrom deskbench.cli.app import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('deskbench.tracks', 'pydantic'))), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "100", "TERM": "dumb"})
    loaded = eval(proc.stderr.strip().splitlines()[-1])  # noqa: S307 - our own printed list
    assert loaded == sorted(["deskbench.tracks", *(f"deskbench.tracks.{n}{s}" for n in BUILTIN for s in ("", ".cli"))])
    for name in ("analyse", "import-tasks", "import", "rubric", "compare-sheets", "verify"):
        assert f"\n│ {name} " in proc.stdout


def test_a_registered_track_s_command_is_listed_and_built(echo: None) -> None:
    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert shown.exit_code == 0 and "echo-say" in _tools_panel(shown.output)
    said = CliRunner().invoke(app, ["echo-say", "Quiet", "--agent", "echo-lower"])
    assert said.exit_code == 0 and said.output.strip() == "quiet"


def test_a_track_s_demo_flag_is_built_shown_checked_and_handed_to_its_leg(
        echo: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import deskbench.generate.demo as bundle
    from deskbench.cli import demo as demo_cli

    shown = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
    assert shown.exit_code == 0
    assert "--echo-limit" in shown.output and "echo: only the first N echo tasks." in shown.output
    for flag, default in (("--local-limit", "5"), ("--analytics-limit", "2"), ("--deliverables-limit", "1")):
        row = next(line for line in shown.output.splitlines() if f" {flag} " in line)
        assert f"[default: {default}]" in row  # the built-in legs' flags as before
    refused = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "d"), "--echo-limit", "0"])
    assert isinstance(refused.exception, UserError)  # one line, exit 2 (cli/app.py main)
    assert str(refused.exception) == "--echo-limit 0 is not valid; use 1 or more"
    assert not (tmp_path / "d").exists()  # refused before any leg ran
    # the echo leg alone (the built-in legs take minutes) gets the value given
    ECHO_LEG.build(tmp_path / "bundle" / "echo", seed=0)
    monkeypatch.setattr(demo_cli, "legs", lambda: [("echo", ECHO_LEG)])
    monkeypatch.setattr(bundle, "bundled_dir", lambda: tmp_path / "bundle")
    ECHO_LEG.seen.clear()
    CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "out"), "--echo-limit", "2", "--quiet"])
    assert ECHO_LEG.seen == [2]


def test_an_install_whose_metadata_predates_the_entry_points_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in tracks come from the installed metadata: an install made before they were entry
    points (an old editable install) says how to refresh it, never "no track takes --tasks"."""
    import deskbench.plugins as plugins

    monkeypatch.setattr(plugins, "_entry_points", {"tracks": {}})
    monkeypatch.setattr(formats, "_TRACKS", {})
    monkeypatch.setattr(formats, "_loaded", False)
    with pytest.raises(UserError, match=r"declares none of its tracks .* reinstall it: pip install -e \."):
        formats.loaded()
