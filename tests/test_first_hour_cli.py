"""The first hour (issue 31, item 6): what a user reads first.

`deskbench --help` lists every command once, one line each, in panels in a fixed order, without
internal names; `run --help` (and score, compare) shows its options in panels that agree with
which track takes which flag; help texts are shown as written (square brackets kept); and the
command line starts without importing model SDKs, numpy, pandas, pydantic or any track. The last
is checked by the modules imported, never by a clock (benchmarks/bench_cli_startup.py measures the
CPU time)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from deskbench.cli import panels
from deskbench.cli.app import app
from deskbench.contract.registry import BUILTIN
from deskbench.runs.track_options import COMMON, own_options

# Modules a `--version` or a `--help` must not import: each is imported when a command needs it.
NOT_AT_START = ("openai", "anthropic", "pandas", "numpy", "matplotlib", "pydantic", "asyncio",
                "deskbench.models.registry", "deskbench.models.openai_chat", "deskbench.models.anthropic_chat",
                "deskbench.tracks", "deskbench.runs", "deskbench.corpus")


def _env(columns: int) -> dict[str, str]:
    return {**os.environ, "COLUMNS": str(columns), "TERM": "dumb", "PYTHONIOENCODING": "utf-8"}


def _deskbench(*args: str, columns: int = 100, python: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`python -m deskbench ARGS` at a fixed terminal width, as a user's shell runs it."""
    proc = subprocess.run([sys.executable, *python, "-m", "deskbench", *args], capture_output=True, text=True,
                          env=_env(columns), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def _panels(text: str) -> list[tuple[str, list[str]]]:
    """The panels of a help page in order: (title, the rows inside its box)."""
    found: list[tuple[str, list[str]]] = []
    rows: list[str] | None = None
    for line in text.splitlines():
        title = re.match(r"\s*╭─ (.+?) ─+╮", line)
        if title:
            rows = []
            found.append((title.group(1), rows))
        elif line.strip().startswith("╰"):
            rows = None
        elif rows is not None and line.strip().startswith("│"):
            rows.append(line.strip()[1:-1])
    return found


def test_help_lists_every_command_once_on_one_line_in_panels() -> None:
    text = _deskbench("--help").stdout
    assert len(text.splitlines()) < 60
    for internal in ("Track.", "scorer_options", "§"):
        assert internal not in text
    shown = _panels(text)
    assert shown[0][0] == "Options"
    commands = shown[1:]
    assert [title.split(":")[0].lower() for title, _ in commands] == [
        "start", "run and score", "look at results", "data and benchmarks", "people", "tools"]
    panel_of: dict[str, str] = {}
    for title, rows in commands:
        for row in rows:
            assert not row.startswith("  "), f"a summary in {title!r} takes more than one line: {row.strip()!r}"
            name, _, summary = row.strip().partition(" ")
            assert summary.strip(), f"{name} has no summary"
            assert name not in panel_of, f"{name} is listed twice"
            panel_of[name] = title.split(":")[0].lower()
    assert sorted(panel_of) == sorted(get_command(app).commands)  # type: ignore[attr-defined]
    assert {panel_of[c] for c in ("demo", "init")} == {"start"}
    assert {panel_of[c] for c in ("run", "score", "compare")} == {"run and score"}
    assert {panel_of[c] for c in ("view", "report", "diagnose")} == {"look at results"}
    assert {panel_of[c] for c in ("ingest", "generate", "import-tasks")} == {"data and benchmarks"}
    assert panel_of["serve"] == "people"
    assert {panel_of[c] for c in ("mcp", "sandbox")} == {"tools"}


def test_a_command_missing_from_the_panel_table_is_named() -> None:
    with pytest.raises(RuntimeError, match="deskbench frobnicate: not in cli/panels.py COMMANDS"):
        panels.check_commands(["run", "frobnicate"])


def test_run_help_shows_its_options_in_panels_and_brackets_as_written() -> None:
    wide = _deskbench("run", "--help", columns=250).stdout  # wide enough that no help text wraps
    assert [title for title, _ in _panels(wide)] == [
        "Options", "docqa track", "analytics track", "deliverables track", "Your agent (--agent external)",
        "Execution", "Model settings"]
    assert "pip install 'deskbench[ray]'" in wide
    assert "analyst-agent[last-round-note]" in wide
    assert len(_deskbench("run", "--help", columns=80).stdout.splitlines()) < 220


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


def _long(param: Any) -> str:
    return next(o for o in param.opts if o.startswith("--"))


@pytest.mark.parametrize("command", ["run", "score", "compare"])
def test_option_panels_agree_with_the_tracks(command: str) -> None:
    """A flag in a track's panel is a flag only that track takes (runs/track_options.py); a flag
    only one track takes is in that track's panel, not among every track's."""
    cmd = get_command(app).commands[command]  # type: ignore[attr-defined]
    panels.arrange_options(cmd, command)
    for param in _options(cmd):
        flag = _long(param)
        panel = param.rich_help_panel or panels.OPTIONS_PANEL
        takers = [t for t in BUILTIN if flag in own_options(command, t)]
        if panels.track_of_panel(panel) is not None:
            assert takers == [panels.track_of_panel(panel)], f"{command} {flag} is in {panel!r}; taken by {takers}"
        elif len(takers) == 1 and flag not in COMMON[command]:
            pytest.fail(f"{command} {flag}: only {takers[0]} takes it; put it in that track's panel (cli/panels.py)")


def _walk(command: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    found = [(path, command)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found += _walk(sub, [*path, name])
    return found


def test_every_square_bracket_of_every_help_text_is_shown() -> None:
    """Rich would take `[ray]` in `pip install 'deskbench[ray]'` for markup and drop it: every help
    text is escaped once, where commands are built, so each bracketed part shows as written."""
    runner = CliRunner()
    checked = 0
    for path, command in _walk(get_command(app), []):
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        brackets = {b for text in texts for b in re.findall(r"\[[^\[\]\n]*\]", text)}
        if not brackets:
            continue
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "2000", "TERM": "dumb"}).output
        for bracket in brackets:
            assert bracket.replace("\\[", "[") in shown, f"deskbench {' '.join(path)} --help drops {bracket}"
            checked += 1
    assert checked >= 5  # deskbench[ray], deskbench[inspect], [default: ...], agent[variant], ...


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["run", "--help"]], ids=" ".join)
def test_the_command_line_starts_without_importing_what_commands_need(args: list[str]) -> None:
    proc = _deskbench(*args, python=("-X", "importtime"))
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "deskbench.cli.app" in imported  # the importtime report is there: the check below means something
    # The top-level help is drawn with Rich alone (cli/panels.py): Typer's help module, with its
    # Markdown and Traceback support, is for a command's own page.
    late = NOT_AT_START + (("typer.rich_utils", "rich.markdown") if args[0] != "run" else ())
    early = sorted(m for m in imported if any(m == p or m.startswith(p + ".") for p in late))
    assert early == [], f"deskbench {' '.join(args)} imports {early[:10]}"


def test_the_help_builds_no_command_and_a_command_line_only_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    """Typer reads each command's signature when it builds it; the top-level help lists the commands
    from the panel table instead, and a command line builds the one command it names."""
    group: Any = get_command(app)
    group.get_help(group.context_class(group, info_name="deskbench"))
    assert "diagnose" in capsys.readouterr().out
    assert group._built == {}
    assert group.get_command(None, "diagnose").name == "diagnose"
    assert list(group._built) == ["diagnose"]
