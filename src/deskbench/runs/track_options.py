"""Which options each track takes, for `deskbench run`, `score` and `compare`.

A flag a track does not take is an error naming the track, never silently ignored. The options
every track takes are listed here; each track declares its own as a typed model (`Track.run_options`,
`score_options`, `compare_options`: contract/options.py), from which the CLI builds its flags
(cli/track_flags.py) and the track gets a validated instance (`track_options`), so a fourth
track adds none here.

Options are named by their primary flag (the first of a --x/--no-x pair). `given_flags` reads
from the command's click context which flags the user actually gave (the command line or the
environment), so a default, even a value equal to it, is never mistaken for a choice: typer
passes defaults, the context knows where each value came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deskbench.errors import UserError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from deskbench.contract.track import Track

# `deskbench run`: the options every track takes.
RUN_COMMON = frozenset({
    "--tasks", "--out", "--agent", "--model", "--judge", "--concurrency", "--cache", "--prices", "--attempts",
    "--temperature", "--top-p", "--sampling-top-k", "--decoding", "--reasoning-effort", "--max-tokens",
    "--judge-temperature", "--judge-top-p", "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json", "--quiet",
    "--executor", "--ray-address", "--retry-errors", "--max-cost", "--token-budget", "--on-budget", "--batch-api",
})
# `deskbench score`: a predictions file is docqa; a run directory is its run's track.
SCORE_COMMON = frozenset({
    "--system", "--items-out", "--judge", "--judge-concurrency", "--judge-temperature", "--judge-top-p",
    "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json", "--scorer", "--batch-api",
})
# `deskbench compare`: the scorer's options of the runs' track, as `score` takes them.
COMPARE_COMMON = frozenset({
    "--system", "--resamples", "--seed", "--output", "--judge", "--judge-concurrency", "--judge-temperature",
    "--judge-top-p", "--judge-reasoning-effort", "--judge-max-tokens", "--capabilities", "--json",
})
COMMON: dict[str, frozenset[str]] = {"run": RUN_COMMON, "score": SCORE_COMMON, "compare": COMPARE_COMMON}


def own_options(command: str, track: str) -> frozenset[str]:
    """The flags `track` itself declares for `command`: its `run_options` model's (contract/options.py), ..."""
    from deskbench.contract.options import flag_specs
    from deskbench.contract.registry import get_track

    return frozenset(s.flag for s in flag_specs(getattr(get_track(track), f"{command}_options"), f"{track} {command}"))


def track_options(command: str, track: Track, params: Mapping[str, object]) -> BaseModel:
    """The track's options of `command`, a validated instance of its model, from the command's
    parameters by name (a value None: not given, the model's default). A value the model refuses
    is one line naming the flag."""
    from pydantic import ValidationError

    from deskbench.contract.options import flag_specs

    model: type[BaseModel] = getattr(track, f"{command}_options")
    flags = {s.param: s.flag for s in flag_specs(model, f"{track.name} {command}")}
    try:
        return model.model_validate({k: params[k] for k in flags if params.get(k) is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else ""
        flag = flags.get(name, name)
        raise UserError(f"{flag} {params.get(name)!r} is not valid for the {track.name} track: {error['msg']}; "
                        f"see deskbench {command} --help") from None


def preflight_judges(judge: str | None, options: BaseModel) -> None:
    """Every judge the command will open checked before it starts (its key, its settings): --judge
    and the track's flags marked `preflight` (analytics' --chart-judge, --file-judge)."""
    from deskbench.contract.options import flag_specs
    from deskbench.models.registry import preflight

    names = [judge, *(getattr(options, s.param) for s in flag_specs(type(options), "options") if s.preflight)]
    for name in names:
        if name:
            preflight(name, role="judge")


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
    longs = [str(o) for o in param.opts if o.startswith("--")]
    return longs[0] if longs else str(param.opts[0])


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
