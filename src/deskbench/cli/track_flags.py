"""The flags `deskbench run`, `score` and `compare` take from the tracks' option models.

Each track declares its own options of a command as a pydantic model (contract/options.py); the
command here is its options every track takes (its function's signature) plus every registered
track's flags, built when the command is built (cli/root.py builds a command when it is used).
A flag several tracks declare is one flag (the first track's help text); they must agree on what
it takes. Which flags the track of the run actually takes is checked when the command runs
(runs/track_options.py).

`deskbench run --help` must start without pydantic or any track (tests/test_first_hour_cli.py):
when no track module is loaded yet and no installed plugin declares a track, the built-in tracks'
flags are read from cli/track_flags_builtin.py, which `python -m deskbench.cli.track_flags`
writes from the models (a test keeps the two equal).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from deskbench.contract.flags import FlagSpec

COMMANDS = ("run", "score", "compare")


def live_specs(command: str) -> dict[str, tuple[FlagSpec, ...]]:
    """Every registered track's flags of `command`, read from its option model."""
    from deskbench.contract.options import flag_specs
    from deskbench.contract.registry import tracks

    return {name: flag_specs(getattr(track, f"{command}_options"), f"{name} {command} options")
            for name, track in tracks().items()}


def track_specs(command: str) -> dict[str, tuple[FlagSpec, ...]]:
    """The tracks' flags of `command` by track: from the models once the tracks are loaded (or a
    plugin declares one), else the built-in tracks' as written from them."""
    from deskbench.cli.track_flags_builtin import FLAGS

    if "deskbench.contract.registry" in sys.modules:
        return live_specs(command)
    from deskbench.plugins import declared

    if set(declared("tracks")) - set(FLAGS[command]):
        return live_specs(command)
    return FLAGS[command]


def merged(command: str) -> list[FlagSpec]:
    """One flag per name over the tracks (registry order), each as the first track declaring it
    spells it; two tracks that disagree on what one flag takes is a developer's error naming both."""
    seen: dict[str, tuple[str, FlagSpec]] = {}
    for track, specs in track_specs(command).items():
        for spec in specs:
            first = seen.get(spec.flag)
            if first is None:
                seen[spec.flag] = (track, spec)
            elif (first[1].param, first[1].kind, first[1].default, first[1].short, first[1].negative) != (
                    spec.param, spec.kind, spec.default, spec.short, spec.negative):
                raise TypeError(f"{command} {spec.flag}: the {first[0]} and {track} tracks declare it differently "
                                f"({first[1]} and {spec}); one flag means one thing (cli/grammar.py)")
    return [spec for _, spec in seen.values()]


_TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "path": Path, "switch": bool, "pair": bool,
                          "strs": list[str]}


def parameter(spec: FlagSpec) -> inspect.Parameter:
    """The typer parameter of one flag (keyword-only: the command takes everything by name)."""
    decls = [f"{spec.flag}/{spec.negative}" if spec.negative else spec.flag, *([spec.short] if spec.short else [])]
    base = _TYPES[spec.kind]
    annotation = base | None if spec.default is None and spec.kind != "switch" else base
    return inspect.Parameter(spec.param, inspect.Parameter.KEYWORD_ONLY, default=spec.default,
                             annotation=Annotated[annotation, typer.Option(*decls, help=spec.help)])


class WithTrackFlags:
    """A command function whose signature, as typer reads it, also has every track's flags of
    `command` (inserted after its parameter `after`; `specs`: they, when not the tracks' option
    models': `deskbench demo`'s legs); called, it passes the function its own parameters (a
    track's values are in the click context's `params`)."""

    def __init__(self, fn: Callable[..., Any], command: str, after: str,
                 specs: Callable[[], Sequence[FlagSpec]] | None = None) -> None:
        self.fn = fn
        self.command = command
        self.after = after
        self.specs = specs
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__annotations__: dict[str, Any] = {}  # typer reads the types from the signature

    @property
    def __signature__(self) -> inspect.Signature:
        own = list(inspect.signature(self.fn, eval_str=True).parameters.values())
        names = {p.name for p in own}
        extra = [parameter(s) for s in (self.specs() if self.specs is not None else merged(self.command))]
        taken = [p.name for p in extra if p.name in names]
        if taken:
            raise TypeError(f"{self.command}: a track's option {taken[0]!r} is one every track takes "
                            "(runs/track_options.py COMMON); rename the track's")
        at = next(i for i, p in enumerate(own) if p.name == self.after) + 1
        params = own[:at] + extra + own[at:]
        return inspect.Signature([p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params])

    def __call__(self, **kwargs: Any) -> Any:
        own = inspect.signature(self.fn).parameters
        return self.fn(**{k: v for k, v in kwargs.items() if k in own})


def with_track_flags(fn: Callable[..., Any], command: str, after: str,
                     specs: Callable[[], Sequence[FlagSpec]] | None = None) -> Callable[..., Any]:
    """`fn` as a command that also takes the tracks' flags of `command` (see WithTrackFlags)."""
    return WithTrackFlags(fn, command, after, specs)


def builtin_source() -> str:
    """cli/track_flags_builtin.py as the built-in tracks' models say it should be."""
    from deskbench.contract.registry import tracks

    shipped = [name for name, track in tracks().items() if type(track).__module__.startswith("deskbench.")]
    lines = ['"""The built-in tracks\' flags of run, score and compare, written from their option models by',
             "`python -m deskbench.cli.track_flags` (do not edit: tests/contract/test_track_typed_options.py checks it).",
             "Read by cli/track_flags.py when no track is loaded, so `run --help` needs neither pydantic nor a track.",
             '"""', "", "from __future__ import annotations", "", "from deskbench.contract.flags import FlagSpec", "",
             "FLAGS: dict[str, dict[str, tuple[FlagSpec, ...]]] = {"]
    for command in COMMANDS:
        specs = live_specs(command)
        lines.append(f"    {command!r}: {{")
        for name in shipped:
            lines.append(f"        {name!r}: (")
            lines += [f"            {spec!r}," for spec in specs[name]]
            lines.append("        ),")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    (Path(__file__).with_name("track_flags_builtin.py")).write_text(builtin_source(), encoding="utf-8")
