"""What `--help` shows first: the commands in panels, one line each, and each command's options
in panels (every track's, one per track, execution, model settings).

`COMMANDS` is the table of the core's top-level commands: the panel each is listed in, in the
order shown, and its one-line summary (the details stay in the command's own `--help`); cli/root.py
lists the commands from it without building them. A track's commands are not in it: each track
declares them, with their panel, summary and place (contract/cli.py TrackCommand), through
Track.cli_commands, and `layout` puts them among the core's. `OPTIONS` puts a command's options in
the core's panels by their long flag; a flag one track alone declares (its option model, read by
cli/track_flags.py) or whose help starts with a track's name and a colon is in that track's panel;
any other stays in the first panel ("Options"), so a new flag is shown, just not grouped. Options
are arranged when help is rendered (cli/grammar.py), so it costs nothing on any other invocation.

Help texts are escaped for Rich once, when a command is built (`escape_help`): a square bracket in
a docstring or an option's help (`pip install 'deskbench[ray]'`) is shown as written, never taken
for markup.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from rich.markup import escape

START = "Start"
RUN = "Run and score"
RESULTS = "Look at results"
DATA = "Data and benchmarks"
PEOPLE = "People: annotators and graders"
TOOLS = "Tools"

# panel -> (command, one-line summary), in the order `deskbench --help` lists them: the core's
# commands (a track's own come from its Track.cli_commands, placed by `layout`).
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
        ("analyse", "Analyses of runs and task sets (items, agreement, effort, cost, task statistics)"),
        ("export", "Write a run for another tool (Inspect AI)"),
    )),
    (DATA, (
        ("ingest", "Ingest PDFs into a searchable corpus"),
        ("search", "Search a corpus page by page"),
        ("page", "Render one page of a corpus as an image"),
        ("convert", "A colpali_engine adapter as a model --retriever loads"),
        ("generate", "Generate a fresh benchmark with exact answers"),
        ("fetch", "Download a released benchmark (MADQA) as tasks and a corpus"),
        ("schema", "The JSON Schema of a track's tasks or answers"),
    )),
    (PEOPLE, (
        ("serve", "The web app: human baseline, grading, labels"),
        ("calibrate", "Calibrate an LLM judge on human labels"),
    )),
    (TOOLS, (
        ("mcp", "Serve a track's tools over MCP to any agent"),
        ("sandbox", "Run Python in the sandbox"),
    )),
)
PANEL_OF: dict[str, tuple[int, str, str]] = {  # core command -> (rank, panel, summary)
    name: (rank, panel, summary)
    for rank, (panel, name, summary) in enumerate((p, n, s) for p, rows in COMMANDS for n, s in rows)
}


def layout(track_commands: Sequence[Any] = ()) -> list[tuple[str, list[tuple[str, str]]]]:
    """The top-level commands by panel, in the order `--help` lists them: the core's (`COMMANDS`)
    and the tracks' top-level commands (contract/cli.py TrackCommand: its panel, summary, and its
    place: `before` or `after` a command of that panel, else last), in the tracks' order: of two
    placed after the same command, the first track's comes first. A panel no core command has
    comes after the core's, by title."""
    rows = {title: list(listed) for title, listed in COMMANDS}
    placed_after: dict[str, set[str]] = {}  # a command -> the track commands placed right after it
    for command in track_commands:
        listed = rows.setdefault(command.panel, [])
        names = [name for name, _ in listed]
        if command.before in names:
            at = names.index(command.before)
        elif command.after in names:
            at = names.index(command.after) + 1
            while at < len(names) and names[at] in placed_after.get(command.after, set()):
                at += 1
            placed_after.setdefault(command.after, set()).add(command.name)
        else:
            at = len(listed)
        listed.insert(at, (command.name, command.summary))
    titles = [title for title, _ in COMMANDS]
    return [(title, rows[title]) for title in titles + sorted(set(rows) - set(titles))]


OPTIONS_PANEL = "Options"  # Typer's first panel: what every track takes
TASK_TRACKS = "analytics and deliverables tracks"  # `deskbench mcp --tasks`: one task of a tasks file or package
EXTERNAL = "Your agent (--agent external)"
EXECUTION = "Execution"
MODEL_SETTINGS = "Model settings"  # cli/settings.py puts the model-settings flags there
TRACK_PANEL = " track"  # a track's panel: its name and this ("docqa track")
TRACK_COMMANDS = ("run", "score", "compare")  # the commands whose track flags come from the tracks' option models
# the other commands whose options are grouped by the track their help names first ("docqa: ...")
BY_HELP = ("report", "mcp", "calibrate sample")

# command path -> core panel -> long flags (a track's flags find their panel themselves: `_panel_of`).
OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "run": {
        EXTERNAL: ("--command", "--url", "--timeout"),
        EXECUTION: ("--concurrency", "--executor", "--ray-address", "--unsafe-local", "--cache", "--batch-api", "--prices",
                    "--max-cost", "--token-budget", "--on-budget"),
    },
    "mcp": {
        TASK_TRACKS: ("--tasks", "--task", "--max-rounds"),
    },
}
PREFIXES: dict[str, tuple[str, ...]] = {  # a core panel -> what an option's help starts with to say so
    EXTERNAL: ("--agent external (every track): ",),
}


def track_names() -> list[str]:
    """The tracks' names in their order, as `run --help` knows them (cli/track_flags.py: from the
    option models once the tracks are loaded, else as written from them), without loading any."""
    from deskbench.cli.track_flags import track_specs

    return list(track_specs("run"))


def track_of_panel(panel: str) -> str | None:
    """The track whose panel `panel` is ("docqa track" -> docqa), None for a core panel."""
    name = panel.removesuffix(TRACK_PANEL)
    return name if panel.endswith(TRACK_PANEL) and name in track_names() else None


def _track_prefixes(track: str) -> tuple[str, ...]:
    """What an option's help starts with to say it is `track`'s, redundant under its panel's title."""
    return (f"{track} runs: ", f"{track} run: ", f"{track}: ")


def _panel_of(path: str, options: list[Any]) -> dict[str, str]:
    """Each long flag of `path`'s options -> its panel: the core's (`OPTIONS`), else the panel of
    the one track declaring it (run, score, compare: cli/track_flags.py), else of the track its
    help names first ("docqa: ...", the commands of `BY_HELP`); a flag of none of them is not in
    the result (Options)."""
    found = {flag: panel for panel, flags in OPTIONS.get(path, {}).items() for flag in flags}
    names = track_names()
    if path in TRACK_COMMANDS:
        from deskbench.cli.track_flags import track_specs

        takers: dict[str, list[str]] = {}
        for name, specs in track_specs(path).items():
            for spec in specs:
                takers.setdefault(spec.flag, []).append(name)
        for flag, by in takers.items():
            if len(by) == 1:
                found.setdefault(flag, by[0] + TRACK_PANEL)
        return found
    for param in options if path in BY_HELP else ():
        help_text = param.help or ""
        named = next((t for t in names if help_text.startswith(_track_prefixes(t))), None)
        if named is not None:
            found.setdefault(_long(param), named + TRACK_PANEL)
    return found


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
    """Put `command`'s options in their panels for `path` ("run", "serve batches": `_panel_of`),
    and the panels in order: Options, the tracks' (in the tracks' order), the core's, then
    others as declared. Arguments keep their order."""
    options = [param for param in command.params if _is_option(param)]
    panel_of = _panel_of(path, options)
    for param in options:
        if _long(param) in panel_of:
            param.rich_help_panel = panel_of[_long(param)]
            track = track_of_panel(param.rich_help_panel)
            prefixes = _track_prefixes(track) if track is not None else PREFIXES.get(param.rich_help_panel, ())
            param.help = _without_prefix(param.help or "", prefixes)
    order = (OPTIONS_PANEL, *(name + TRACK_PANEL for name in track_names()), TASK_TRACKS, EXTERNAL, EXECUTION,
             MODEL_SETTINGS)

    def rank(param: Any) -> int:
        if not _is_option(param):
            return -1
        panel = getattr(param, "rich_help_panel", None) or OPTIONS_PANEL
        return order.index(panel) if panel in order else len(order)

    command.params.sort(key=rank)  # stable: the declared order within a panel


def check_commands(names: Any) -> None:
    """Every top-level command has a panel and a summary here; one without is an error of the
    assembly (cli/app.py), not a user's."""
    missing = [name for name in names if name not in PANEL_OF]
    if missing:
        raise RuntimeError(f"deskbench {', '.join(missing)}: not in cli/panels.py COMMANDS; give each a panel and a summary")


def print_root_help(group: Any, ctx: Any, names: list[str], track_commands: Sequence[Any] = ()) -> None:
    """`deskbench --help`: the usage, the description, the app's options, then the command panels
    of `layout` (only `names`: the core's and the tracks' top-level commands, `track_commands`
    as the tracks declare them), one line each. Drawn as Typer draws a help page, with Rich's
    Panel and Table alone: Typer's help module also imports Markdown and Traceback support, most
    of this page's start-up."""
    from rich import box
    from rich.console import Console
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    check_commands([name for name in names if name not in {c.name for c in track_commands}])
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
    for title, rows in layout(track_commands):
        listed = [(name, escape(summary)) for name, summary in rows if name in names]
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
