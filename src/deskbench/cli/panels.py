"""What `--help` shows first: the commands in panels, one line each, and each command's options
in panels (every track's, one per track, execution, model settings).

`COMMANDS` is the one table of the top-level commands: the panel each is listed in, in the order
shown, and its one-line summary (the details stay in the command's own `--help`); cli/root.py
lists the commands from it without building them. It names the built-in tracks' commands too
(each track adds them through Track.cli_commands), so `--help` loads no track;
tests/contract/test_track_cli_hooks.py keeps it equal to the hooks. `OPTIONS` puts a command's options in panels
by their long flag; an option it does not name stays in the first panel ("Options"), so a new
flag is shown, just not grouped. Options are arranged when help is rendered (cli/grammar.py), so
it costs nothing on any other invocation.

Help texts are escaped for Rich once, when a command is built (`escape_help`): a square bracket in
a docstring or an option's help (`pip install 'deskbench[ray]'`) is shown as written, never taken
for markup.
"""

from __future__ import annotations

import inspect
from typing import Any

from rich.markup import escape

START = "Start"
RUN = "Run and score"
RESULTS = "Look at results"
DATA = "Data and benchmarks"
PEOPLE = "People: annotators and graders"
TOOLS = "Tools"

# panel -> (command, one-line summary), in the order `deskbench --help` lists them.
COMMANDS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (START, (
        ("demo", "The bundled demo end to end, offline, no key needed"),
        ("init", "A task set over your own PDFs or spreadsheets"),
        ("list", "The agents, scorers, tracks and model providers"),
    )),
    (RUN, (
        ("run", "Run an agent over tasks and score it; resumes"),
        ("score", "Score a run, or a predictions file"),
        ("compare", "Compare systems on the same tasks, with tests"),
    )),
    (RESULTS, (
        ("view", "Browse every episode of runs in a web page"),
        ("report", "Write a self-contained HTML report over runs"),
        ("diagnose", "Why episodes failed, and what they cost"),
        ("info", "What a corpus or a run holds"),
        ("analyse", "Item, agreement, effort and cost analyses"),
        ("export", "Write a run for another tool (Inspect AI)"),
    )),
    (DATA, (
        ("ingest", "Ingest PDFs into a searchable corpus"),
        ("search", "Search a corpus page by page"),
        ("page", "Render one page of a corpus as an image"),
        ("generate", "Generate a fresh benchmark with exact answers"),
        ("fetch", "Download a released benchmark (MADQA) as tasks and a corpus"),
        ("import-tasks", "Convert a released benchmark's tasks"),
        ("import", "Make a run from a predictions file"),
        ("schema", "The JSON Schema of a track's tasks or answers"),
    )),
    (PEOPLE, (
        ("serve", "The web app: human baseline, grading, labels"),
        ("rubric", "Rubric grades of deliverables runs, QC"),
        ("calibrate", "Calibrate an LLM judge on human labels"),
    )),
    (TOOLS, (
        ("mcp", "Serve a track's tools over MCP to any agent"),
        ("sandbox", "Run Python in the sandbox"),
        ("compare-sheets", "Judge a spreadsheet against a reference"),
        ("verify", "Check one deliverables response"),
    )),
)
PANEL_OF: dict[str, tuple[int, str, str]] = {  # command -> (rank, panel, summary)
    name: (rank, panel, summary)
    for rank, (panel, name, summary) in enumerate((p, n, s) for p, rows in COMMANDS for n, s in rows)
}

OPTIONS_PANEL = "Options"  # Typer's first panel: what every track takes
DOCQA = "docqa track"
ANALYTICS = "analytics track"
DELIVERABLES = "deliverables track"
TASK_TRACKS = "analytics and deliverables tracks"
EXTERNAL = "Your agent (--agent external)"
EXECUTION = "Execution"
MODEL_SETTINGS = "Model settings"  # cli/settings.py puts the model-settings flags there
TRACK_PANELS = {DOCQA: "docqa", ANALYTICS: "analytics", DELIVERABLES: "deliverables"}
PANEL_ORDER = (OPTIONS_PANEL, DOCQA, ANALYTICS, DELIVERABLES, TASK_TRACKS, EXTERNAL, EXECUTION, MODEL_SETTINGS)

_FILE_JUDGE = ("--chart-judge", "--file-judge", "--file-judge-all")
# command path -> panel -> long flags. A flag one track takes is in that track's panel; a flag
# every track (or several) takes stays in "Options" (runs/track_options.py is the table of which
# track takes what; tests/test_first_hour_cli.py keeps the two in agreement).
OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "run": {
        DOCQA: ("--corpus", "--top-k", "--view", "--max-steps", "--max-sub-calls", "--protocol", "--preset"),
        ANALYTICS: ("--no-summary", "--last-round-note", "--cjk-font-hint", *_FILE_JUDGE),
        DELIVERABLES: ("--task", "--system", "--rerun", "--inline-chars", "--trap-hints", "--web", "--web-record"),
        EXTERNAL: ("--command", "--url", "--timeout"),
        EXECUTION: ("--concurrency", "--executor", "--ray-address", "--unsafe-local", "--cache", "--prices"),
    },
    "score": {
        DOCQA: ("--tasks", "--pool-humans", "--by", "--official", "--kuiper-ties", "--effort", "--skip-invalid",
                "--judge-cache", "--cache", "--q0", "--q1", "--m0", "--m1", "--judge-calibration"),
        ANALYTICS: _FILE_JUDGE,
        DELIVERABLES: ("--reviewed-only",),
    },
    "compare": {
        DOCQA: ("--judge-cache", "--cache"),
        ANALYTICS: _FILE_JUDGE,
        DELIVERABLES: ("--reviewed-only",),
    },
    "report": {
        DOCQA: ("--pool-humans", "--corpus"),
        ANALYTICS: _FILE_JUDGE,
        DELIVERABLES: ("--reviewed-only",),
    },
    "calibrate sample": {
        ANALYTICS: ("--category", *_FILE_JUDGE, "--unsafe-local"),
    },
    "mcp": {
        DOCQA: ("--corpus", "--question", "--top-k"),
        TASK_TRACKS: ("--tasks", "--task", "--max-rounds"),
    },
}


# What an option's help starts with to say where it applies, redundant under its panel's title.
PREFIXES: dict[str, tuple[str, ...]] = {
    **{panel: (f"{track} runs: ", f"{track} run: ", f"{track}: ") for panel, track in TRACK_PANELS.items()},
    EXTERNAL: ("--agent external (every track): ",),
}


def _without_prefix(text: str, prefixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if text.startswith(prefix):
            rest = text[len(prefix):]
            return rest[:1].upper() + rest[1:]
    return text


def _long(param: Any) -> str:
    longs = [o for o in param.opts if o.startswith("--")]
    return str(longs[0] if longs else param.opts[0])


def _is_option(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def arrange_options(command: Any, path: str) -> None:
    """Put `command`'s options in the panels `OPTIONS` names for `path` ("run", "serve batches"),
    and the panels in `PANEL_ORDER` (others after, as declared). Arguments keep their order."""
    panel_of = {flag: panel for panel, flags in OPTIONS.get(path, {}).items() for flag in flags}
    for param in command.params:
        if _is_option(param) and _long(param) in panel_of:
            param.rich_help_panel = panel_of[_long(param)]
            param.help = _without_prefix(param.help or "", PREFIXES.get(param.rich_help_panel, ()))

    def rank(param: Any) -> int:
        if not _is_option(param):
            return -1
        panel = getattr(param, "rich_help_panel", None) or OPTIONS_PANEL
        return PANEL_ORDER.index(panel) if panel in PANEL_ORDER else len(PANEL_ORDER)

    command.params.sort(key=rank)  # stable: the declared order within a panel


def check_commands(names: Any) -> None:
    """Every top-level command has a panel and a summary here; one without is an error of the
    assembly (cli/app.py), not a user's."""
    missing = [name for name in names if name not in PANEL_OF]
    if missing:
        raise RuntimeError(f"deskbench {', '.join(missing)}: not in cli/panels.py COMMANDS; give each a panel and a summary")


def print_root_help(group: Any, ctx: Any, names: list[str],
                    extra: dict[str, tuple[str, str]] | None = None) -> None:
    """`deskbench --help`: the usage, the description, the app's options, then the command panels
    of `COMMANDS` (only `names`), one line each; `extra`: commands of a plugin track, not in the
    table, by name -> (panel, summary) as the track declares them. Drawn as Typer draws a help
    page, with Rich's Panel and Table alone: Typer's help module also imports Markdown and
    Traceback support, most of this page's start-up."""
    from rich import box
    from rich.console import Console
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    extra = extra or {}
    check_commands([name for name in names if name not in extra])
    console = Console(highlight=False)

    def panel(title: str, rows: list[tuple[str, str]], name_width: int) -> None:
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
        table.add_column(style="bold cyan", no_wrap=True, min_width=name_width)
        table.add_column(ratio=1)
        for name, text in rows:
            table.add_row(name, Text.from_markup(text))
        console.print(Panel(table, title=title, title_align="left", border_style="dim", box=box.ROUNDED))

    console.print(Padding(Text(group.get_usage(ctx), style="bold"), 1))
    if group.help:
        console.print(Padding(Text.from_markup(group.help.split("\n\n")[0]), (0, 1, 1, 1)))
    options = [(" / ".join([*p.opts, *p.secondary_opts]) + ("" if p.is_flag else f" {p.metavar or p.name.upper()}"),
                p.help or "") for p in group.get_params(ctx) if _is_option(p) and not getattr(p, "hidden", False)]
    panel(OPTIONS_PANEL, options, max(len(name) for name, _ in options))
    width = max((len(name) for name in names), default=0)
    titles = [title for title, _ in COMMANDS]
    added = [(p, name, s) for name, (p, s) in extra.items() if name in names]
    for title in titles + sorted({p for p, _, _ in added} - set(titles)):
        rows = dict(COMMANDS).get(title, ())
        listed = [(name, escape(summary)) for name, summary in rows if name in names]
        listed += [(name, escape(summary)) for p, name, summary in added if p == title]
        if listed:
            panel(title, listed, width)


def _plain(text: str) -> str:
    """A help text as one paragraph per blank-line block (single line breaks of a docstring are
    only source layout; a paragraph starting with \\b keeps its lines), escaped for Rich."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return escape("\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs))


def escape_help(command: Any) -> None:
    """Escape `command`'s help texts (its own, its short help, its epilog, each parameter's) for
    Rich, once, when the command is built."""
    for attr in ("help", "short_help", "epilog"):
        text = getattr(command, attr, None)
        if text:
            setattr(command, attr, _plain(text))
    for param in command.params:
        text = getattr(param, "help", None)
        if text:
            param.help = escape(text)
