"""One CLI grammar: every flag name means one thing in every command that has it.

`FLAGS` is the table (docs/cli.md prints it; tests/cli/test_cli_grammar.py walks every command's
`--help` against it): a flag's short form, whether it takes a value and what it means are the
same wherever it appears. `RENAMED` lists the names an earlier release used; for one release they
still work, hidden from `--help`, and say once on stderr what to write instead. The rewriting
happens in the command class (`GrammarCommand.parse_args`), so it holds for the console script and
for `CliRunner(app)` alike, and only option tokens are touched (an option's value never is).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

import deskbench.cli.panels as panels
from deskbench.console import err


@dataclass(frozen=True)
class Flag:
    """A long flag of the grammar; `value` is what it takes ("" for a switch)."""

    name: str
    short: str | None
    value: str
    meaning: str
    negative: str | None = None  # the --no-x (or other) half of a switch pair


def _f(name: str, value: str, meaning: str, short: str | None = None, negative: str | None = None) -> Flag:
    return Flag(name, short, value, meaning, negative)


FLAGS: tuple[Flag, ...] = (
    # where things are read and written
    _f("--tasks", "PATH", "the tasks a command reads: a JSONL file, or a deliverables package folder", "-t"),
    _f("--corpus", "DIR", "a corpus directory (made by `deskbench ingest`)", "-c"),
    _f("--out", "DIR", "the directory a command writes into or adds to: a run, a benchmark, an export, the web "
       "app's run store", "-o"),
    _f("--output", "FILE", "the one file a command writes (an HTML report, a JSON analysis, an image, a CSV, a JSONL)"),
    _f("--items-out", "FILE", "also write one JSON line per scored item"),
    _f("--plot", "FILE", "also write a PNG plot"),
    _f("--outputs", "DIR", "the folder holding the files a response produced"),
    _f("--input", "PATH", "an input file or folder, read-only in the sandbox (repeat)"),
    _f("--keep", "DIR", "keep the files the sandbox produced in this folder"),
    _f("--from", "PATH", "what a command builds from: your own PDFs or spreadsheets (init), a dataset snapshot "
       "folder (fetch)"),
    _f("--prices", "FILE", "a price table (TOML or JSON) for models deskbench has no price for"),
    _f("--capabilities", "FILE", "capability rules (TOML or JSON) for models deskbench does not know"),
    _f("--judge-calibration", "FILE", "q0, q1, m0, m1 from `deskbench calibrate compute --json`"),
    _f("--web-record", "DIR", "record every web search and fetch into this folder"),
    # what to act on
    _f("--system", "NAME", "the system a command acts on, as stored (agent:model); repeat where several are taken"),
    _f("--task", "ID", "only this task (repeat)"),
    _f("--limit", "N", "only the first N tasks"),
    _f("--category", "NAME", "only this task category"),
    _f("--split", "NAME", "only this split of a dataset: train | dev | test (repeat)"),
    _f("--by", "FIELD", "also break the scores down by this task field (repeat)"),
    _f("--track", "NAME", "the track: docqa | analytics | deliverables (or a plugin's)"),
    _f("--user", "NAME", "a web app user", "-u"),
    _f("--batch", "NAME", "a human-baseline batch", "-b"),
    _f("--grader", "NAME", "only this grader's rubric grades"),
    _f("--submission", "", "the submission format instead of the task format"),
    # agents and models
    _f("--agent", "AGENT", "the agent: a built-in name (see `deskbench list agents`) or package.module:Name; "
       "pairs with --model in order"),
    _f("--model", "MODEL", "the model the command's agent or grader calls (provider/model-id, or local)", "-m"),
    _f("--judge", "MODEL", "the LLM judge model (else the deterministic check); score: repeat to compare judges"),
    _f("--chart-judge", "MODEL", "analytics: the vision judge for charts (default: --judge)"),
    _f("--file-judge", "MODEL", "analytics: the agentic File Judge model"),
    _f("--file-judge-all", "", "analytics: every output file goes to the File Judge | only those the comparator "
       "cannot read", negative="--file-judge-deferred"),
    _f("--command", "CMD", "your agent's command, run once per task (`{question}` is replaced)"),
    _f("--url", "URL", "your agent's HTTP endpoint, called once per task"),
    _f("--scorer", "NAME", "score with this plugin scorer instead of the track's own"),
    _f("--temperature", "X", "sampling temperature of --model"),
    _f("--top-p", "X", "nucleus sampling of --model"),
    _f("--sampling-top-k", "N", "top-k sampling of --model, where its provider takes it"),
    _f("--decoding", "PRESET", "a paper's per-model decoding preset for --model: aida (AIDABench Table 3), "
       "or aida:ROW"),
    _f("--reasoning-effort", "LEVEL", "reasoning effort of --model"),
    _f("--max-tokens", "N", "output limit per call of --model"),
    _f("--judge-temperature", "X", "sampling temperature of the judge"),
    _f("--judge-top-p", "X", "nucleus sampling of the judge"),
    _f("--judge-reasoning-effort", "LEVEL", "reasoning effort of the judge"),
    _f("--judge-max-tokens", "N", "output limit per call of the judge"),
    _f("--cache", "", "reuse and store model responses in the response cache", negative="--no-cache"),
    _f("--judge-cache", "FILE", "the judge's response cache (SQLite)"),
    # how much, how many at once
    _f("--concurrency", "N", "how many of the command's own units run at once (run: episodes; rubric: grading "
       "calls)"),
    _f("--judge-concurrency", "N", "judge calls in flight at once"),
    _f("--executor", "NAME", "run: where episodes execute: local (this process) | ray (a Ray cluster)"),
    _f("--ray-address", "HOST:PORT", "run --executor ray: the cluster's head (default: start one on this machine)"),
    _f("--workers", "N", "processes for PDF extraction (fetch: also PDF downloads at once)"),
    _f("--attempts", "N", "attempts per task (pass@k)"),
    _f("--batch-api", "", "run, score: the model calls through the providers' batch APIs (half price, answers within "
       "their window; a killed command resumes its batches) (docs/batch.md)"),
    _f("--max-cost", "USD", "run: the run's cost limit in USD (stored episodes count), or each episode's with "
       "episode=USD (docs/cost.md)"),
    _f("--token-budget", "N", "run: the run's token limit (input + output; 2m, 50k), or each episode's with "
       "episode=N"),
    _f("--on-budget", "MODE", "run: at the run's limit, the episodes in flight: finish | cancel (unstored)"),
    _f("--max-steps", "N", "docqa: agent iterations per episode"),
    _f("--max-rounds", "N", "analytics and deliverables: execute_code rounds per episode"),
    _f("--max-sub-calls", "N", "docqa rlm: sub-model calls per episode"),
    _f("--top-k", "N", "pages per search", "-k"),
    _f("--retriever", "SPEC", "docqa: what a search runs on: bm25 | KIND=MODEL | A+B (fused by RRF)", "-r"),
    _f("--retriever-download", "", "docqa: let --retriever fetch its model from the Hugging Face hub"),
    _f("--embedding", "MODEL", "docqa analyse drift, multihop: the text embedding (default: the paper's "
       "Snowflake/snowflake-arctic-embed-m-v2.0 when installed, else TF-IDF, named)"),
    _f("--embedding-download", "", "docqa analyse: let --embedding fetch its model from the Hugging Face hub"),
    _f("--base", "MODEL", "convert: the base an adapter was trained on (default: the one adapter_config.json names)"),
    _f("--download", "", "convert: let it fetch the adapter and the base from the Hugging Face hub"),
    _f("--query", "FORM", "retrieve: the question as written (question) or its content words joined by OR (keywords)"),
    _f("--text-retriever", "SPEC", "docqa colbert-llm, mdocagent: their text retrieval (default colbert=colbert-ir/colbertv2.0)"),
    _f("--image-retriever", "SPEC", "docqa m3docrag, mdocagent: their page-image retrieval (default colpali=vidore/colpali)"),
    _f("--protocol", "NAME", "docqa bm25-agent: the loop it runs: official | paper | a script's protocol"),
    _f("--preset", "NAME", "docqa bm25-agent: its defaults: official (process_dataset.py) | paper (Appendix G.1)"),
    _f("--top-systems", "N", "pool this many most accurate systems"),
    _f("--timeout", "SECONDS", "wall-time limit"),
    _f("--memory-mb", "N", "address-space limit in MB"),
    _f("--num-docs", "N", "how many PDFs to generate"),
    _f("--num-questions", "N", "how many questions to generate"),
    _f("--num-tasks", "N", "how many tasks to generate"),
    _f("--num-items", "N", "how many items to sample"),
    _f("--sample-n", "N", "rows per sampled region of a sheet"),
    _f("--resamples", "N", "bootstrap resamples"),
    _f("--seed", "N", "the random seed (the same seed, the same output)"),
    _f("--batch-size", "N", "questions per human-baseline batch"),
    _f("--local-limit", "N", "demo: docqa questions for the local model"),
    _f("--analytics-limit", "N", "demo: analytics tasks for the local model"),
    _f("--deliverables-limit", "N", "demo: deliverables packages for the local model"),
    _f("--inline-chars", "N", "deliverables: source text inlined in the prompt"),
    # agent and scoring variants
    _f("--view", "MODE", "docqa: what the agent sees of a page: text | image | both"),
    _f("--web", "MODE", "deliverables: web search for the agent: recorded:DIR | brave"),
    _f("--deny-url", "PATTERN", "deliverables: one more source web agents may not reach (host/path, or @FILE)"),
    _f("--allow-peeking", "", "deliverables: no deny-list of the benchmarks' own sources (docs/no-peeking.md)"),
    _f("--no-summary", "", "analytics: no summary round (the paper's ablation)"),
    _f("--last-round-note", "", "analytics: tell the agent when its last round comes"),
    _f("--cjk-font-hint", "", "analytics: tell the agent which CJK fonts are installed"),
    _f("--trap-hints", "", "deliverables: name the trap kinds in the prompt"),
    _f("--unsafe-local", "", "run model-written code WITHOUT isolation where bubblewrap is missing"),
    _f("--rerun", "", "run again episodes that are already stored"),
    _f("--retry-errors", "", "run: run again the episodes stored with an error, each as a new try"),
    _f("--regrade", "", "grade again what is already graded"),
    _f("--reviewed-only", "", "deliverables: count only QC-reviewed rubric grades"),
    _f("--pool-humans", "", "docqa: one `human` row for every annotator"),
    _f("--official", "", "docqa: the official MADQA evaluator's numbers", negative="--no-official"),
    _f("--kuiper-ties", "MODE", "docqa: robust | stable ties in the Kuiper statistic"),
    _f("--effort", "MEASURE", "docqa: effort for Kuiper: steps | tokens | seconds"),
    _f("--q0", "X", "judge specificity for bias correction"),
    _f("--q1", "X", "judge sensitivity for bias correction"),
    _f("--m0", "N", "calibration items humans judged incorrect"),
    _f("--m1", "N", "calibration items humans judged correct"),
    _f("--skip-invalid", "", "skip (and count) bad lines instead of stopping", negative="--no-skip-invalid"),
    _f("--strict", "", "strict | tolerant table structure", negative="--tolerant"),
    _f("--instruction", "TEXT", "the task instruction"),
    _f("--question", "TEXT", "the question the agent is asked"),
    _f("--mode", "MODE", "rubric grading mode"),
    _f("--method", "NAME", "the statistical method"),
    _f("--test", "N", "test split size"),
    _f("--dev", "N", "dev split size"),
    _f("--train", "N", "train split size"),
    _f("--sentinel-fraction", "X", "share of each split kept for sentinels"),
    _f("--injections", "X", "share of questions with a prompt injection"),
    _f("--difficulty-steps", "N", "steps for rows without a step count"),
    _f("--check", "", "check instead of write: exit 1 on a difference"),
    _f("--remove", "", "remove instead of add"),
    _f("--episodes", "", "also list every episode"),
    # ingest and pages
    _f("--ocr", "MODE", "when to OCR a page: auto | always | never"),
    _f("--ocr-engine", "NAME", "tesseract | rapidocr"),
    _f("--ocr-lang", "LANGS", "tesseract languages"),
    _f("--page-text", "MODE", "which text a page keeps"),
    _f("--dpi", "N", "page image resolution"),
    _f("--max-pixels", "N", "page image pixel cap"),
    _f("--max-bytes", "N", "page image size cap"),
    _f("--format", "NAME", "the format written"),
    _f("--images", "", "include page images", negative="--no-images"),
    # the web apps and servers
    _f("--host", "ADDR", "address to bind (127.0.0.1 keeps it on this machine)"),
    _f("--port", "N", "port to bind"),
    _f("--transport", "NAME", "stdio | http"),
    _f("--max-episodes", "N", "episodes an MCP server opens before it refuses calls"),
    _f("--max-calls-per-second", "N", "tool calls a second an MCP server takes, all clients together"),
    _f("--viewer-url", "URL", "a running `deskbench view` to link episodes to"),
    _f("--session-idle", "DURATION", "a web session ends after this long without a request"),
    _f("--session-max", "DURATION", "a web session ends this long after its login"),
    _f("--ssl-keyfile", "FILE", "serve over TLS with this private key"),
    _f("--ssl-certfile", "FILE", "serve over TLS with this certificate chain"),
    _f("--trust-proxy", "", "behind a TLS proxy that sets X-Forwarded-For"),
    _f("--oracle", "", "show the gold evidence pages"),
    _f("--calibration", "FILE", "judge-calibration items to label in the web app"),
    # output
    _f("--json", "", "print machine-readable JSON on stdout"),
    _f("--quiet", "", "no progress bars", "-q"),
    _f("--verbose", "", "also show the libraries' log messages (MCP server, HTTP, Ray) on stderr"),
    _f("--version", "", "print deskbench's version and exit"),
    _f("--help", "", "show the command's help and exit"),
)
BY_NAME: dict[str, Flag] = {f.name: f for f in FLAGS}


@dataclass(frozen=True)
class Renamed:
    """An earlier name of a flag in the commands matching `commands` (fnmatch patterns of the command
    path, e.g. "analyse *"), accepted for one more release."""

    commands: tuple[str, ...]
    old: str
    new: str


FILE_WRITERS = ("report", "compare", "page", "calibrate sample", "analyse *")
RENAMED: tuple[Renamed, ...] = (
    Renamed(("search",), "--top", "--top-k"),
    Renamed(FILE_WRITERS, "-o", "--output"),
    Renamed(("export",), "--output", "--out"),
    Renamed(("rubric export", "import-tasks"), "--out", "--output"),
    Renamed(("rubric export",), "-o", "--output"),
    Renamed(("run",), "--only-task", "--task"),
    Renamed(("run",), "--only-system", "--system"),
    Renamed(("score", "report", "compare", "calibrate sample"), "--concurrency", "--judge-concurrency"),
    Renamed(("calibrate sample",), "--n", "--num-items"),
    Renamed(("generate docqa",), "--docs", "--num-docs"),
    Renamed(("generate docqa",), "--questions", "--num-questions"),
    Renamed(("generate analytics", "generate deliverables"), "--tasks", "--num-tasks"),
    Renamed(("serve batches",), "--size", "--batch-size"),
    Renamed(("analyse failures",), "--top", "--top-systems"),
    Renamed(("rubric grade",), "--judge-max-tokens", "--max-tokens"),
    Renamed(("rubric grade",), "--judge-temperature", "--temperature"),
    Renamed(("rubric grade",), "--judge-top-p", "--top-p"),
    Renamed(("rubric grade",), "--judge-reasoning-effort", "--reasoning-effort"),
)


def renamed_in(command_path: str) -> dict[str, str]:
    """Old flag -> new flag for one command ("serve batches")."""
    return {r.old: r.new for r in RENAMED if any(fnmatch.fnmatchcase(command_path, p) for p in r.commands)}


def _takes_value(command: Any, ctx: Any) -> dict[str, bool]:
    takes: dict[str, bool] = {}
    for param in command.get_params(ctx):
        if getattr(param, "param_type_name", "") != "option":
            continue
        for opt in [*param.opts, *param.secondary_opts]:
            takes[opt] = not param.is_flag and not getattr(param, "count", False)
    return takes


def rewrite(command_path: str, args: list[str], takes_value: dict[str, bool]) -> tuple[list[str], list[Renamed]]:
    """`args` with earlier flag names replaced by the current ones; values, positional arguments and
    everything after `--` are left as written."""
    renames = renamed_in(command_path)
    if not renames:
        return args, []
    out: list[str] = []
    used: list[Renamed] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        if not token.startswith("--") and len(token) > 2 and token[:2] in renames and token.startswith("-"):
            name, eq, value = token[:2], "=", token[2:]  # a short flag with its value attached: -oFILE
        if name in renames:
            new = renames[name]
            used.append(Renamed((command_path,), name, new))
            name = new
            token = f"{name}{eq}{value}"
        out.append(token)
        if token.startswith("-") and not eq and takes_value.get(name, False) and i + 1 < len(args):
            out.append(args[i + 1])
            i += 1
        i += 1
    return out, used


def _command_path(ctx: Any) -> str:
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(reversed(names))


def _no_type_on_switches(params: list[Any]) -> None:
    """Typer shows `<bool>` beside a plain switch (`--json <bool>`), as if it took a value."""
    for param in params:
        if getattr(param, "param_type_name", "") == "option" and param.is_flag:
            param.metavar = ""


def take_verbose(args: list[str], takes_value: dict[str, bool]) -> tuple[list[str], bool]:
    """`args` without --verbose, and whether it was there: the app's flag (`deskbench --verbose`)
    is taken after any command's name too. Values and everything after `--` are left as written."""
    out: list[str] = []
    found = False
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        if token == "--verbose":
            found = True
        else:
            out.append(token)
            if token.startswith("-") and "=" not in token and takes_value.get(token, False) and i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
        i += 1
    return out, found


def _set_verbose(value: bool) -> None:
    """The libraries' logs on stderr with --verbose, else quiet (deskbench/logs.py)."""
    from deskbench import logs

    logs.setup(value)


def _help_switch(option: Any) -> None:
    """--help as a plain switch: no value type shown, and False when not given (typer would
    otherwise convert its None through pydantic, a start-up cost for every command)."""
    _no_type_on_switches([option])
    option.default = False


class GrammarCommand(TyperCommand):
    """A command that accepts the earlier flag names of `RENAMED` (one line on stderr each) and
    `--verbose` (the app's), and shows switches without a value type, its options in panels
    (cli/panels.py) and its help texts as written (escaped for Rich)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _no_type_on_switches(self.params)
        panels.escape_help(self)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        panels.arrange_options(self, _command_path(ctx))
        super().format_help(ctx, formatter)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _help_switch(option)
        return option

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        path = _command_path(ctx)
        args, used = rewrite(path, args, _takes_value(self, ctx))
        args, verbose = take_verbose(args, _takes_value(self, ctx))
        if verbose:
            _set_verbose(True)
        for r in dict.fromkeys(used):
            err.print(f"deskbench {path}: {r.old} is deprecated and goes in the next release; use {r.new}")
        return super().parse_args(ctx, args)


class GrammarGroup(TyperGroup):
    """A command group whose `--help` shows switches without a value type, and its help texts as
    written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _no_type_on_switches(self.params)
        panels.escape_help(self)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        panels.arrange_options(self, _command_path(ctx))
        super().format_help(ctx, formatter)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _help_switch(option)
        return option


def version() -> str:
    import importlib.metadata  # only for --version: not a start-up cost of every command

    try:
        return importlib.metadata.version("deskbench")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree without an install
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        print(f"deskbench {version()}")
        raise typer.Exit()


def give_classes(typer_app: typer.Typer) -> None:
    """Give every command of `typer_app` (and of its groups) the grammar's command classes: the
    app's own commands when it is assembled, a track's (cli/root.py) when they are built."""

    def unset(cls: object, default: type) -> bool:  # typer marks a default with a placeholder
        return cls is None or cls is default or isinstance(cls, DefaultPlaceholder)

    if unset(typer_app.info.cls, TyperGroup):
        typer_app.info.cls = GrammarGroup
    for command in typer_app.registered_commands:
        if unset(command.cls, TyperCommand):
            command.cls = GrammarCommand
    for group in typer_app.registered_groups:
        if unset(group.cls, TyperGroup):
            group.cls = GrammarGroup
        if group.typer_instance is not None:
            give_classes(group.typer_instance)


def apply(app: typer.Typer) -> None:
    """Give every command of `app` (and of its groups) the grammar's command classes, and the app a
    `--version` flag. Called once, after every command module has registered its commands."""
    give_classes(app)

    @app.callback()
    def root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,  # noqa: B008
                                           help="Print deskbench's version and exit."),
             verbose: bool = typer.Option(False, "--verbose", callback=_set_verbose,  # noqa: B008
                                          help="Also show the libraries' log messages (MCP server, HTTP, Ray) on "
                                               "stderr; also taken after a command's name.")) -> None:
        """Evaluate AI agents on analysts' desk work: document QA, analytics, deliverables."""



def flag_table() -> str:
    """The flag table as docs/cli.md prints it (a test keeps them equal)."""
    rows = ["| flag | short | takes | meaning |", "|---|---|---|---|"]
    for f in FLAGS:
        name = f"`{f.name}`" + (f" / `{f.negative}`" if f.negative else "")
        rows.append(f"| {name} | {f'`{f.short}`' if f.short else ''} | {f.value or '(switch)'} | {f.meaning} |")
    return "\n".join(rows)


def renamed_table() -> str:
    """The earlier names as docs/cli.md prints them."""
    rows = ["| command | earlier name | now |", "|---|---|---|"]
    for r in RENAMED:
        rows.append(f"| {', '.join(f'`{c}`' for c in r.commands)} | `{r.old}` | `{r.new}` |")
    return "\n".join(rows)
