"""How a field of a track's option model is spelled on the command line (no pydantic here).

`Flag` goes in a field's Annotated metadata when the flag is not spelled from the field's name
(`only_task` is `--task`), has a short form (`-k`), is one half of a switch pair
(`--file-judge-all/--file-judge-deferred`) or names a model the command checks before it starts
(a judge: its key and settings, `preflight`). `FlagSpec` is one flag as the CLI builds it
(cli/track_flags.py): plain data, so `deskbench run --help` can be drawn from the built-in tracks'
flags (cli/track_flags_builtin.py) without importing pydantic or a track.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["str", "int", "float", "path", "switch", "pair", "strs"]


@dataclass(frozen=True)
class Flag:
    """A field's flag when the default spelling (`--field-name`, no short form) is not it."""

    name: str | None = None  # "--task"
    short: str | None = None  # "-k"
    negative: str | None = None  # "--file-judge-deferred": a bool field is a --x/--y pair
    preflight: bool = False  # a model (a judge) whose key and settings are checked before the command starts


@dataclass(frozen=True)
class FlagSpec:
    """One flag of a track's command, as the CLI adds it: `param` is the model's field (and the
    click parameter's name), `kind` what it takes ("switch": a plain --x; "pair": --x/--y;
    "strs": repeated values), `default` the field's (None for a repeated flag given no value)."""

    param: str
    flag: str
    kind: Kind
    default: str | int | float | bool | None
    help: str
    short: str | None = None
    negative: str | None = None
    preflight: bool = False
