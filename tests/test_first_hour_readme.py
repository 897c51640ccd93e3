"""README.md is a user's guide (issue 31, item 6): short, with a table of contents that works,
exactly the two set-up commands, every `deskbench ...` line of its code blocks a real command with
real options, every relative link in it and in docs/ pointing at something that exists, and the
docqa quick start runnable as printed."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import ingest, run_cli

from deskbench.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def unfenced(text: str) -> str:
    """The text outside fenced code blocks (a `#` line there is not a heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans (links there are not links)."""
    return re.sub(r"`[^`\n]*`", "", unfenced(text))


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in unfenced(page.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def sections(text: str) -> dict[str, str]:
    """`## ` heading -> the section's text up to the next `## ` heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def blocks(text: str) -> list[str]:
    """The bodies of the fenced code blocks."""
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


def code_lines(text: str, only_first: bool = False) -> list[str]:
    """The logical lines of the fenced code blocks (or of the first): backslash continuations joined."""
    lines: list[str] = []
    for block in blocks(text)[:1] if only_first else blocks(text):
        logical = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            lines.append((logical + line).strip())
            logical = ""
    return [line for line in lines if line]


def deskbench_calls(line: str) -> list[tuple[dict[str, str], list[str]]]:
    """Each `deskbench` command on a shell line as (the VAR=value words before it, its arguments):
    comments dropped, split at `&&`, `||`, `;` and `|`, redirections left out."""
    tokens = shlex.split(line, comments=True)
    calls, segment = [], []
    for token in [*tokens, ";"]:
        if token not in ("&&", "||", ";", "|"):
            segment.append(token)
            continue
        for i, word in enumerate(segment):
            if word == "deskbench" or word.endswith("/deskbench"):
                env = dict(w.split("=", 1) for w in segment[:i] if re.fullmatch(r"[A-Z_]+=.*", w))
                args = segment[i + 1:]
                while ">" in args:
                    del args[args.index(">"):args.index(">") + 2]
                calls.append((env, args))
                break
        segment = []
    return calls


def deskbench_commands(line: str) -> list[list[str]]:
    """The arguments of each `deskbench` command on a shell line."""
    return [args for _, args in deskbench_calls(line)]


def options_of(command: Any) -> set[str]:  # a click Command or Group (Typer vendors click)
    return {o for p in command.params if p.param_type_name == "option" for o in (*p.opts, *p.secondary_opts)} | {"--help"}


@functools.cache
def cli() -> Any:
    """The click command tree behind `deskbench` (built once: it takes a while)."""
    return typer.main.get_command(app)


def check_command(args: list[str]) -> list[str]:
    """What is wrong with `deskbench ARGS` against the real CLI: an unknown command or an option
    the command does not have. Placeholders (`[--json]`, `...`) are read as what they stand for."""
    command = cli()
    problems: list[str] = []
    words = [a.strip("[]") for a in args if a.strip("[]") not in ("", "...")]
    path = ["deskbench"]
    i = 0
    while hasattr(command, "commands") and i < len(words) and not words[i].startswith("-"):
        if words[i] not in command.commands:
            return [f"{' '.join(path)} has no command {words[i]!r}"]
        command = command.commands[words[i]]
        path.append(words[i])
        i += 1
    if hasattr(command, "commands") and not getattr(command, "invoke_without_command", False) \
            and not ({"--help", "--version"} & set(words[i:])):
        problems.append(f"{' '.join(path)} needs a subcommand")
    known = options_of(command) | {"--verbose"}  # the root's switch, also taken after a command (cli/grammar.py)
    for word in words[i:]:
        if word.startswith("-") and len(word) > 1 and not re.fullmatch(r"-\d[\d.]*", word):
            name = word.split("=", 1)[0]
            if name not in known:
                problems.append(f"{' '.join(path)} has no option {name}")
    return problems


def test_readme_is_a_short_guide() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; move reference material to docs/"
    heads = list(sections(README.read_text(encoding="utf-8")))
    for track in ("docqa", "analytics", "deliverables"):
        assert any(h.startswith(f"Quick start: {track}") for h in heads), f"no quick start for {track}"
    assert "Evaluate your own agent" in heads


def test_table_of_contents_links_resolve_to_headings() -> None:
    text = README.read_text(encoding="utf-8")
    secs = sections(text)
    toc = secs.get("Contents")
    assert toc, "README.md has no '## Contents' section"
    targets = re.findall(r"\]\(#([^)]+)\)", toc)
    assert targets, "the table of contents has no links"
    own = anchors(README)
    assert [t for t in targets if t not in own] == []
    listed = set(targets)
    assert [h for h in secs if h != "Contents" and slug(h) not in listed] == [], "a section missing from the contents"


def test_setup_section_holds_exactly_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    secs = sections(text)
    assert list(secs)[:2] == ["Contents", "Set-up commands"], "the set-up commands come first, after the contents"
    setup = secs["Set-up commands"]
    commands = [line for line in code_lines(setup) if not line.startswith("#")]
    assert commands[:2] == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert [c for c in commands[2:] if c.startswith("bash ")] == [], "only two set-up commands"
    assert text.index("bash scripts/test.sh") < len(text) // 4, "the set-up commands are near the top"
    for other in (secs[h] for h in secs if h != "Set-up commands"):
        assert "bash scripts/" not in "\n".join(code_lines(other))


def test_every_deskbench_line_in_readme_names_a_real_command_and_its_options() -> None:
    checked = 0
    problems = []
    for line in code_lines(README.read_text(encoding="utf-8")):
        for args in deskbench_commands(line):
            checked += 1
            problems += [f"{line!r}: {p}" for p in check_command(args)]
    assert checked >= 20
    assert problems == []


def test_every_deskbench_line_in_the_reference_bash_blocks_is_real_too() -> None:
    """The same check on docs/*.md's bash blocks (the reference moved there from the README)."""
    checked, problems = 0, []
    for page in PAGES[1:]:
        for body in re.findall(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M):
            for line in code_lines(f"```\n{body}```\n"):
                for args in deskbench_commands(line):
                    checked += 1
                    problems += [f"{page.name}: {line!r}: {p}" for p in check_command(args)]
    assert checked >= 50
    assert problems == []


def test_the_command_check_catches_what_it_should() -> None:
    """The checker above is itself right: it refuses an unknown command, a group without its
    subcommand and an option of another command, and reads placeholders as options."""
    assert check_command(["run", "--agent", "lexical", "--tasks", "t.jsonl"]) == []
    assert check_command(["rnu", "--agent", "x"]) == ["deskbench has no command 'rnu'"]
    assert check_command(["rubric", "--json"])[0] == "deskbench rubric needs a subcommand"
    assert check_command(["score", "runs/r", "--max-rounds", "3"]) == ["deskbench score has no option --max-rounds"]
    assert check_command(["score", "runs/r", "[--jsn]"]) == ["deskbench score has no option --jsn"]
    assert check_command(["serve", "--out", "runs/h"]) == []
    assert check_command(["--version"]) == []


def test_every_relative_link_resolves() -> None:
    problems = []
    for page in PAGES:
        for m in LINK.finditer(prose(page.read_text(encoding="utf-8"))):
            target = m.group(1) or m.group(2)
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                problems.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                problems.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert problems == []


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the repository after the demo: src/, examples/, tests/ and
    .demo/corpus with the bundled PDFs (their text layer only, to stay quick)."""
    root = tmp_path_factory.mktemp("repo")
    for name in ("src", "examples", "tests"):
        (root / name).symlink_to(ROOT / name)
    ingest(root / ".demo" / "corpus", [ROOT / "src/deskbench/data/demo/docqa/pdfs"], ocr="never", workers=1)
    return root


def run_block(root: Path, block: str) -> list[str]:
    """Every `deskbench` line of a README code block as printed, from `root`, with this Python's
    folder first on PATH (as after `source .venv/bin/activate`); servers (view, serve) are left
    out. Through conftest.run_cli: in this process unless the line sets a variable only a fresh
    interpreter reads (PYTHONPATH=...). Returns the commands run."""
    ran = []
    for line in code_lines(block, only_first=True):
        for env, args in deskbench_calls(line):
            if args[0] == "view" or args[0] == "serve" and args[1].startswith("-"):
                continue
            path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
            proc = run_cli(*args, cwd=root, env={**env, "PATH": path})
            assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
            ran.append(" ".join(args[:2]))
    return ran


def test_docqa_quick_start_runs_as_printed(after_demo: Path) -> None:
    block = sections(README.read_text(encoding="utf-8"))["Quick start: docqa (documents and citations)"]
    ran = run_block(after_demo, block)
    assert ran[0] == "run --agent" and {"score", "report"} <= {r.split()[0] for r in ran}
    outputs = [a for line in code_lines(block, only_first=True) for args in deskbench_commands(line) for a in args
               if a.endswith((".html", ".jsonl"))]
    assert outputs and all((after_demo / o).stat().st_size > 0 for o in outputs if o.startswith(".demo/"))


def test_own_agent_quick_starts_run_as_printed(after_demo: Path) -> None:
    """The plugin with the scripted model reaches a real score offline; the MCP agent runs."""
    own = sections(README.read_text(encoding="utf-8"))["Evaluate your own agent"]
    plugin, mcp = blocks(own)[:2]
    assert "scripted:" in plugin and "--agent external" in mcp
    for block, run_dir in ((plugin, "keyword-agent"), (mcp, "my-external")):
        assert run_block(after_demo, f"```bash\n{block}```\n")[0] == "run --agent"
        scores = json.loads(run_cli("score", f".demo/runs/{run_dir}", "--json", cwd=after_demo).stdout)
        report = next(iter(scores.values()))
        assert report["n"] == (60 if run_dir == "keyword-agent" else 5)
        if run_dir == "keyword-agent":
            assert 0 < report["accuracy"] < 1  # some of the file's answers are wrong on purpose


@pytest.mark.parametrize("page", ["docqa", "analytics", "deliverables", "results", "web", "plugins", "models",
                                  "benchmarks", "fidelity", "corpus", "generate", "cli", "cluster", "formats"])
def test_the_reference_pages_exist_and_the_readme_points_to_them(page: str) -> None:
    assert (ROOT / "docs" / f"{page}.md").exists()
    assert f"(docs/{page}.md)" in README.read_text(encoding="utf-8")
