"""One CLI grammar: every command's --help against the flag table, the earlier names, --version."""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from deskbench.cli.app import app
from deskbench.cli.grammar import BY_NAME, RENAMED, flag_table, renamed_table, rewrite

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[tuple[str, Any]]:
    """Every command and group of the app, by its path ("" is the app itself)."""
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        found.append((" ".join(path), command))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(get_command(app), [])
    return found


COMMANDS = _commands()
LEAVES = {path: c for path, c in COMMANDS if not hasattr(c, "commands")}


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


def test_the_app_has_the_commands_a_user_meets() -> None:
    assert {"run", "score", "search", "report", "serve batches", "analyse failures", "generate docqa"} <= set(LEAVES)
    assert len(LEAVES) > 50


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: p or "deskbench")
def test_every_help_follows_the_flag_table(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split(), "--help"] if path else ["--help"],
                                 env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output  # a switch takes no value
    command = dict(COMMANDS)[path]
    names: set[str] = set()
    for param in _options(command):
        longs = [o for o in param.opts if o.startswith("--")]
        shorts = [o for o in param.opts if not o.startswith("--")]
        assert len(longs) == 1, f"{path}: {param.opts} has {len(longs)} long names (one name per flag)"
        flag = BY_NAME.get(longs[0])
        assert flag is not None, f"`deskbench {path}` has {longs[0]}, which the flag table (cli/grammar.py) lacks"
        assert shorts == ([flag.short] if flag.short else []), f"{path} {longs[0]}: short {shorts}, table {flag.short}"
        assert param.is_flag == (flag.value == ""), f"{path} {longs[0]}: a switch in one place, a value in another"
        assert param.secondary_opts == ([flag.negative] if flag.negative else []), f"{path} {longs[0]}"
        names.add(longs[0])
        assert longs[0] in result.output
    for old in (r.old for r in RENAMED if any(fnmatch.fnmatchcase(path, p) for p in r.commands)):
        assert old not in {o for p in _options(command) for o in [*p.opts, *p.secondary_opts]}


def test_every_earlier_name_points_at_a_flag_the_command_has() -> None:
    for r in RENAMED:
        matched = [p for p in LEAVES if any(fnmatch.fnmatchcase(p, pat) for pat in r.commands)]
        assert matched, f"{r.commands} matches no command"
        for path in matched:
            opts = {o for p in _options(LEAVES[path]) for o in [*p.opts, *p.secondary_opts]}
            assert r.new in opts and r.old not in opts, (path, r)


def test_docs_print_the_tables() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert flag_table() in text and renamed_table() in text
    assert "docs/cli.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_rewrite_touches_option_names_only() -> None:
    takes = {"--top-k": True, "-k": True, "--json": False, "--corpus": True, "-c": True}
    args = ["--corpus", "--top", "--top", "3", "'--top'", "--json", "--", "--top"]
    out, used = rewrite("search", args, takes)
    assert out == ["--corpus", "--top", "--top-k", "3", "'--top'", "--json", "--", "--top"]
    assert [(u.old, u.new) for u in used] == [("--top", "--top-k")]
    assert rewrite("search", ["--top=4"], takes)[0] == ["--top-k=4"]
    assert rewrite("report", ["-oX.html", "RUN"], {"--output": True})[0] == ["--output=X.html", "RUN"]
    assert rewrite("export", ["-o", "DIR"], {"--out": True, "-o": True})[0] == ["-o", "DIR"]  # -o is export's --out
    assert rewrite("run", ["--top", "3"], {"--top-k": True}) == (["--top", "3"], [])  # not an earlier name there


def test_an_earlier_name_still_works_and_says_what_to_write(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["generate", "analytics", "--tasks", "2", "-o", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    assert "--tasks is deprecated and goes in the next release; use --num-tasks" in result.output
    rows = (tmp_path / "g" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 2
    again = CliRunner().invoke(app, ["generate", "analytics", "--num-tasks", "2", "-o", str(tmp_path / "h")])
    assert again.exit_code == 0 and "deprecated" not in again.output
    assert (tmp_path / "h" / "tasks.jsonl").read_bytes() == (tmp_path / "g" / "tasks.jsonl").read_bytes()


def test_an_unknown_flag_is_still_refused() -> None:
    result = CliRunner().invoke(app, ["generate", "analytics", "--tsks", "2", "-o", "x"])
    assert result.exit_code == 2
    assert "--tsks" in result.output


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"deskbench {importlib.metadata.version('deskbench')}"
    assert re.fullmatch(r"deskbench \d+\.\d+\.\d+.*", result.output.strip())


def test_judge_concurrency_is_checked_under_its_name(tmp_path: Path) -> None:
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"question_id": "q", "answer": ["x"], "citations": []}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["score", str(predictions), "--tasks", str(predictions), "--judge-concurrency", "0"])
    assert result.exit_code != 0
    assert "--judge-concurrency 0 is not valid" in str(result.exception) + result.output
