"""Which options each track takes, for `deskbench run`, `score` and `compare`.

A flag a track does not take is an error naming the track, never silently ignored. The options
every track takes are listed here; each track declares its own (`Track.run_options`,
`score_options`, `compare_options`, contract/registry.py), so a fourth track adds none here.

Options are named by their primary flag (the first of a --x/--no-x pair). `given_flags` reads
from the command's click context which flags the user actually gave (the command line or the
environment), so a default, even a value equal to it, is never mistaken for a choice: typer
passes defaults, the context knows where each value came from.
"""

from __future__ import annotations

from typing import Any

from deskbench.errors import UserError

# `deskbench run`: the options every track takes.
RUN_COMMON = frozenset({
    "--tasks", "--out", "--agent", "--model", "--judge", "--concurrency", "--cache", "--prices", "--attempts",
    "--temperature", "--top-p", "--reasoning-effort", "--max-tokens", "--judge-temperature", "--judge-top-p",
    "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json", "--quiet",
    "--executor", "--ray-address", "--retry-errors",
})
# `deskbench score`: a predictions file is docqa; a run directory is its run's track.
SCORE_COMMON = frozenset({
    "--system", "--items-out", "--judge", "--judge-concurrency", "--judge-temperature", "--judge-top-p",
    "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json", "--scorer",
})
# `deskbench compare`: the scorer's options of the runs' track, as `score` takes them.
COMPARE_COMMON = frozenset({
    "--system", "--resamples", "--seed", "--output", "--judge", "--judge-concurrency", "--judge-temperature",
    "--judge-top-p", "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json",
})
COMMON: dict[str, frozenset[str]] = {"run": RUN_COMMON, "score": SCORE_COMMON, "compare": COMPARE_COMMON}


def own_options(command: str, track: str) -> frozenset[str]:
    """The options `track` itself declares for `command` (its `run_options`, ...)."""
    from deskbench.contract.registry import get_track

    return frozenset(getattr(get_track(track), f"{command}_options"))


def takes(command: str, track: str) -> frozenset[str]:
    """Every option `command` takes on `track`: the common ones and the track's own."""
    return COMMON[command] | own_options(command, track) | {"--verbose"}  # every command's (cli/grammar.py)


def check_options(command: str, track: str, given: list[tuple[str, str]]) -> None:
    """Refuse the first given option `track` does not take. `given`: (primary flag, the flag as
    the user wrote it) pairs, as `given_flags` returns them."""
    allowed = takes(command, track)
    for primary, written in given:
        if primary not in allowed:
            own = ", ".join(sorted(own_options(command, track)))
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
