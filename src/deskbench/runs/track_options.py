"""Which options each track takes, for `deskbench run` and `deskbench score`: the one table.

A flag a track does not take is an error naming the track, never silently ignored. The seed of
the Track protocol's "which options it takes" (issue 21): a fourth track adds its row here.

Options are named by their primary flag (the first of a --x/--no-x pair). `given_flags` reads
from the command's click context which flags the user actually gave (the command line or the
environment), so a default, even a value equal to it, is never mistaken for a choice: typer
passes defaults, the context knows where each value came from.
"""

from __future__ import annotations

from typing import Any

from deskbench.errors import UserError

TRACKS = ("docqa", "analytics", "deliverables")

# `deskbench run`: the options every track takes, then each track's own.
RUN_COMMON = frozenset({
    "--tasks", "--out", "--agent", "--model", "--judge", "--concurrency", "--cache", "--prices", "--attempts",
    "--temperature", "--top-p", "--reasoning-effort", "--max-tokens", "--judge-temperature", "--judge-top-p",
    "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json", "--quiet",
})
RUN_OPTIONS: dict[str, frozenset[str]] = {
    "docqa": frozenset({"--corpus", "--limit", "--max-steps", "--max-sub-calls", "--top-k", "--view",
                        "--unsafe-local"}),
    "analytics": frozenset({"--limit", "--max-rounds", "--no-summary", "--last-round-note", "--cjk-font-hint",
                            "--unsafe-local", "--chart-judge", "--file-judge", "--file-judge-all"}),
    "deliverables": frozenset({"--max-rounds", "--unsafe-local", "--only-task", "--only-system", "--rerun",
                               "--inline-chars", "--trap-hints", "--web", "--web-record"}),
}

# `deskbench score`: a predictions file is docqa; a run directory is its run's track.
SCORE_COMMON = frozenset({
    "--system", "--items-out", "--judge", "--concurrency", "--judge-temperature", "--judge-top-p",
    "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json",
})
SCORE_OPTIONS: dict[str, frozenset[str]] = {
    "docqa": frozenset({"--tasks", "--pool-humans", "--by", "--official", "--kuiper-ties", "--effort",
                        "--skip-invalid", "--judge-cache", "--no-cache", "--q0", "--q1", "--m0", "--m1",
                        "--judge-calibration"}),
    "analytics": frozenset({"--chart-judge", "--file-judge", "--file-judge-all"}),
    "deliverables": frozenset({"--reviewed-only"}),
}

# `deskbench compare`: the scorer's options of the runs' track, as `score` takes them.
COMPARE_COMMON = frozenset({
    "--system", "--resamples", "--seed", "--output", "--judge", "--concurrency", "--judge-temperature",
    "--judge-top-p", "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json",
})
COMPARE_OPTIONS: dict[str, frozenset[str]] = {
    "docqa": frozenset({"--judge-cache", "--no-cache"}),
    "analytics": frozenset({"--chart-judge", "--file-judge", "--file-judge-all"}),
    "deliverables": frozenset({"--reviewed-only"}),
}

COMMANDS: dict[str, tuple[frozenset[str], dict[str, frozenset[str]]]] = {
    "run": (RUN_COMMON, RUN_OPTIONS),
    "score": (SCORE_COMMON, SCORE_OPTIONS),
    "compare": (COMPARE_COMMON, COMPARE_OPTIONS),
}


def takes(command: str, track: str) -> frozenset[str]:
    """Every option `command` takes on `track`: the common ones and the track's own."""
    common, own = COMMANDS[command]
    return common | own[track]


def check_options(command: str, track: str, given: list[tuple[str, str]]) -> None:
    """Refuse the first given option `track` does not take. `given`: (primary flag, the flag as
    the user wrote it) pairs, as `given_flags` returns them."""
    allowed = takes(command, track)
    for primary, written in given:
        if primary not in allowed:
            own = ", ".join(sorted(COMMANDS[command][1][track]))
            raise UserError(f"{written} is not an option of the {track} track (it takes: {own}; "
                            f"and the options of every track)")


def _primary(param: Any) -> str:
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[0] if longs else param.opts[0]


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option" and p.name]


def given_flags(ctx: Any, command: str) -> list[tuple[str, str]]:
    """The options the user gave to the running `command` (not their defaults) in its click
    context `ctx` (typer.Context), as (primary flag, flag as written) pairs; none when `ctx` is
    another command's (e.g. `run` calling `score` in Python)."""
    if ctx is None or ctx.command.name != command:
        return []
    given = []
    for param in _options(ctx.command):
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name not in ("COMMANDLINE", "ENVIRONMENT"):
            continue
        primary = _primary(param)
        written = param.secondary_opts[0] if (param.secondary_opts and ctx.params.get(param.name) is False) else primary
        given.append((primary, written))
    return given


def option_names(command: Any) -> set[str]:
    """Every option of a click command by its primary flag (for the test that the table covers them)."""
    return {_primary(p) for p in _options(command)}
