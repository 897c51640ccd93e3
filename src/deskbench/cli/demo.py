"""The main job, no key needed: `deskbench demo` runs every track on the bundled demo benchmark."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from deskbench.cli.common import QuietOpt, at_least_one, execute_with_progress
from deskbench.cli.track_flags import with_track_flags
from deskbench.console import out
from deskbench.contract.flags import FlagSpec
from deskbench.errors import UserError

if TYPE_CHECKING:
    from deskbench.contract.cli import DemoFlag, DemoLeg


def register(app: typer.Typer) -> None:
    """Add `demo`, with each track's leg's flags (`DemoLeg.flags`) after --model."""
    app.command("demo")(with_track_flags(demo, "demo", after="model", specs=leg_flag_specs))


def legs() -> list[tuple[str, DemoLeg]]:
    """Every track's leg of the demo, in the tracks' order (a track without one is left out)."""
    from deskbench.contract.registry import tracks

    return [(name, leg) for name, track in tracks().items() if (leg := track.demo()) is not None]


def leg_flags() -> list[DemoFlag]:
    """The legs' flags of `demo`, one per name (the first leg declaring it), in the tracks' order."""
    found: dict[str, DemoFlag] = {}
    for _, leg in legs():
        for flag in getattr(leg, "flags", ()):  # a leg written without the member adds none
            found.setdefault(flag.flag, flag)
    return list(found.values())


def _param(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def leg_flag_specs() -> list[FlagSpec]:
    """The legs' flags as the command builds them (cli/track_flags.py parameter)."""
    return [FlagSpec(param=_param(f.flag), flag=f.flag, kind="int", default=f.default, help=f.help)
            for f in leg_flags()]


def _leg_values(given: dict[str, Any]) -> dict[str, object]:
    """The legs' flags as given (the command's parameters by name; else their defaults), checked
    before any leg runs: a value below its `at_least` is one line naming the flag."""
    values: dict[str, object] = {}
    for flag in leg_flags():
        value = given.get(_param(flag.flag), flag.default)
        assert isinstance(value, int)
        if value < flag.at_least:
            raise UserError(f"{flag.flag} {value} is not valid; use {flag.at_least} or more")
        values[flag.flag] = value
    return values


def demo(
    ctx: typer.Context,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Where to write the corpus and the run.")] = Path(".demo"),
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model for the agent (default: openai/gpt-5-mini with OPENAI_API_KEY, else local).")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Agent iterations (default 10; 3 with the local model).")] = None,
    workers: Annotated[int, typer.Option(help="Extraction processes.")] = 2,
    quiet: QuietOpt = False,
) -> None:
    """The main job, no key needed: the bundled demo benchmark end to end. Ingests its PDFs, runs
    the no-model lexical baseline and a model agent (the local SmolLM2 unless a model is given),
    scores both and prints the leaderboard."""
    from deskbench.contract.cli import DemoContext
    from deskbench.generate.demo import bundled_dir

    leg_values = _leg_values(ctx.params)  # the legs' flags (WithTrackFlags: in the context, not the signature)
    if max_steps is not None:
        at_least_one("--max-steps", max_steps)
    bundle = bundled_dir()
    shown = legs()
    if any(not (bundle / name).is_dir() for name, _ in shown):
        raise UserError(f"the bundled demo is missing from {bundle}; rebuild it with 'deskbench generate demo'")
    chosen = model or ("openai/gpt-5-mini" if os.environ.get("OPENAI_API_KEY") else "local")
    context = DemoContext(bundle=bundle, out_dir=out_dir, model=chosen, local=chosen.split("/", 1)[0] == "local",
                          flags={**leg_values, "--max-steps": max_steps, "--workers": workers},
                          quiet=quiet, execute=_execute)
    run_dirs = [run_dir for _, leg in shown for run_dir in leg.run(context)]  # each track's leg in turn
    out.print("[bold]3. scores[/bold]")
    _record_scorings(run_dirs)
    from deskbench.report.data import build_report
    from deskbench.report.render import write_report

    data = build_report(run_dirs)  # the tables and the page, from the same default scorers as the stored scorings
    for name, leg in shown:
        if data.has_section(name):
            leg.show(data.section(name).data)
    write_report(data, out_dir / "report.html")
    out.print(f"[bold]4. report[/bold] {out_dir / 'report.html'} (open it in a browser: leaderboard, calibration, "
              "step budget, error classes, breakdowns, analytics pass@k, deliverables VRS and ACCEPT)")
    deskbench = _deskbench_command()
    out.print(escape(f"Per-system scores: {deskbench} score {_shown(out_dir / 'runs' / 'lexical')} (and the other runs "
                     f"beside it); all 5 deliverables packages are in {_shown(bundle / 'deliverables')} "
                     "(--deliverables-limit)."))
    out.print("[bold]5. your agent[/bold] on these questions: " + (
        "offline, the example plugin (examples/custom_agent/keyword_agent.py) with a model that answers from a file "
        "(some answers wrong on purpose); then give your own module:Class and a real --model"
        if (EXAMPLE_AGENT / "demo_answers.jsonl").exists() else
        "your class by module path, run from the folder holding it (examples/custom_agent in the deskbench "
        "repository shows one)"))
    out.print(escape(next_command(deskbench, bundle / "docqa" / "tasks.jsonl", out_dir)), soft_wrap=True)


def _record_scorings(run_dirs: list[Path]) -> None:
    """Score each run as `deskbench score RUN` does (each track's default scorer, no judge), so
    the scoring is stored with the run: `view` and `info` then show the numbers printed here. The
    tables it prints (on stdout, through whichever console) are left out: the leaderboard below
    shows the same numbers; warnings stay on stderr."""
    import contextlib
    import io

    from deskbench.contract.registry import get_track
    from deskbench.runs.store import RunStore
    from deskbench.runs.track import RunRequest
    from deskbench.runs.track_outcomes import show_scores

    for run_dir in run_dirs:
        store = RunStore(run_dir, create=False)
        with contextlib.redirect_stdout(io.StringIO()):
            show_scores(get_track(store.track()), store, store.systems(), RunRequest(tasks=run_dir, out=run_dir),
                        as_json=False)


EXAMPLE_AGENT = Path(__file__).resolve().parents[3] / "examples" / "custom_agent"
"""The example plugin, in a checkout (an installed wheel has no examples/)."""


def _shown(path: Path) -> str:
    """A path as the user can type it from where they are: relative when under that directory (the
    current one, or the one scripts/demo.sh was started from, which then changes to the repo's)."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(os.environ.get("DESKBENCH_SHOW_PATHS_FROM") or Path.cwd()))
    except ValueError:
        return str(absolute)


def _deskbench_command() -> str:
    """How to call the deskbench this demo runs as, for a command to paste: `deskbench` when that
    is the one on PATH, else its path (`.venv/bin/deskbench`), or `python -m deskbench.cli`."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "__main__.py":
        return f"{shlex.quote(_shown(Path(sys.executable)))} -m deskbench.cli"
    on_path = shutil.which(argv0.name)
    if on_path and argv0.exists() and Path(on_path).resolve() == argv0.resolve():
        return argv0.name
    return shlex.quote(_shown(argv0))


def next_command(deskbench: str, tasks: Path, out_dir: Path) -> str:
    """The command that runs the example plugin agent on the demo's questions and corpus with the
    scripted model, as a shell line with this machine's paths."""
    q = shlex.quote
    if (EXAMPLE_AGENT / "demo_answers.jsonl").exists():
        prefix = f"PYTHONPATH={q(_shown(EXAMPLE_AGENT))} "
        agent, model = "keyword_agent:KeywordAgent", f"scripted:{_shown(EXAMPLE_AGENT / 'demo_answers.jsonl')}"
    else:  # no checkout: the example is in the deskbench repository
        prefix, agent, model = "", "your_module:YourAgent", "local"
    return (f"{prefix}{deskbench} run --agent {agent} --model {q(model)} --tasks {q(_shown(tasks))} "
            f"--corpus {q(_shown(out_dir / 'corpus'))} --out {q(_shown(out_dir / 'runs' / 'keyword-agent'))}")


def _execute(prep: object, quiet: bool) -> list[str]:
    """A track's demo leg runs its prepared run with the progress bars (contract/cli.py DemoContext
    types it loosely: the contract imports nothing of the runs)."""
    from deskbench.runs.track import PreparedRun

    assert isinstance(prep, PreparedRun), prep
    return execute_with_progress(prep, quiet)
