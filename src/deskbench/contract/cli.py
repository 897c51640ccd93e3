"""What a track adds to the `deskbench` command line, as data the track hands the core.

A track lists its commands in `Track.cli_commands` (contract/track.py): each names the command,
the group it joins (None: top level; "generate": `deskbench generate <name>`) and the function
that registers it on a Typer app, as "package.module:function", so the module is imported only
when a command line names the command (cli/root.py builds commands lazily). So that `deskbench
--help` lists them without loading the tracks, a track may also declare the same commands in a
light module (no pydantic, no track code: contract/cli.py is all it needs) as a `deskbench.cli`
entry point (`docqa = "deskbench.tracks.docqa.cli:COMMANDS"`); a track that declares none is
loaded for `--help` (cli/root.py listed_track_commands). `deskbench init` asks
`Track.scaffolder` for a `Scaffolder`; `deskbench demo` and `generate demo` ask `Track.demo` for a
`DemoLeg` (and its flags of `demo`); `deskbench calibrate` asks `Track.judge_calibration` for a `JudgeCalibration`. So the
core's command line names no track, and a fourth track adds a command, an init, a demo leg or the
items of its judge to calibrate from its one folder.

Nothing of deskbench is imported here at run time (the standard library only): every core module
and every track may import it without a cycle.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from deskbench.scoring.judge_calibration import CalibrationItem


@dataclass(frozen=True)
class TrackCommand:
    """One command a track adds: `register(app)` (imported from "module:function" when the command
    is built) adds the command or group `name` to the Typer app it is given."""

    # the command's name as typed: "rubric", "compare-sheets", or "docqa" under group "generate"; the group's own
    # name ("analyse" under "analyse"): `register` adds a group of that name whose subcommands all join the core's
    name: str
    register: str  # "package.module:function"; the function takes a typer.Typer and adds `name` to it
    group: str | None = None  # a core group the command joins ("generate"); None: a top-level command
    summary: str = ""  # its line in `deskbench --help`
    panel: str = "Tools"  # the `deskbench --help` panel it is listed in, by title (cli/panels.py)
    after: str | None = None  # its place in that panel: after this command (else last) ...
    before: str | None = None  # ... or before this one (cli/panels.py layout)


@dataclass
class Scaffolded:
    """What `deskbench init` made: the tasks and files written, warnings, and the next command."""

    tasks: int
    files: int
    next_command: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def command_line(self) -> str:
        return shlex.join(self.next_command)


class Scaffolder(Protocol):
    """Writes a task set into the empty folder `dest` from the user's files under `source`
    (None: the bundled demo's files, to try init without one's own)."""

    def __call__(self, dest: Path, source: Path | None, *, workers: int,
                 on_file: Callable[[str], None] | None) -> Scaffolded: ...


@dataclass(frozen=True)
class DemoFlag:
    """A flag of `deskbench demo` a track's leg takes (`DemoLeg.flags`), a whole number like the
    legs' limits: the core adds it to the command (cli/demo.py, as cli/track_flags.py adds the
    tracks' run flags), refuses a value below `at_least` before any leg runs, and hands the value
    to every leg in `DemoContext.flags` under `flag`."""

    flag: str  # "--analytics-limit"
    default: int
    help: str
    at_least: int = 1


@dataclass(frozen=True)
class DemoContext:
    """What `deskbench demo` hands each track's leg: the bundle, where to write, the model, the
    command's flags by name, the core's and every leg's `DemoFlag` ("--local-limit": 5,
    "--max-steps": None, "--workers": 2) and how to
    execute a prepared run with progress bars (cli/common.py execute_with_progress)."""

    bundle: Path  # the bundled demo benchmark; a track's part is bundle / its name
    out_dir: Path
    model: str
    local: bool  # the local model: legs run a few items in a few steps
    flags: Mapping[str, object]
    quiet: bool
    execute: Callable[[object, bool], object]  # (PreparedRun, quiet) -> its result


class DemoLeg(Protocol):
    """A track's part of the bundled demo: what `generate demo` builds and `demo` runs and shows.
    Its `flags` are the `deskbench demo` flags it adds (a leg without the member adds none)."""

    @property
    def flags(self) -> Sequence[DemoFlag]: ...

    def build(self, out: Path, seed: int) -> None:
        """Generate this track's part of the bundle into `out` (byte-identical for a seed)."""
        ...

    def run(self, context: DemoContext) -> Sequence[Path]:
        """Run this track's systems on its part of the bundle; the run directories (none when it
        is skipped, with the reason on stderr)."""
        ...

    def show(self, section: object) -> None:
        """Print this track's results from its report section's data (report/data.py)."""
        ...


class JudgeCalibration(Protocol):
    """A track's part of `deskbench calibrate` (scoring/judge_calibration.py does the rest: the
    sample, the labels, q0 and q1)."""

    def sample_items(self, run_dirs: Sequence[Path],
                     params: Mapping[str, object]) -> tuple[Sequence[CalibrationItem], Mapping[str, int]]:
        """The items of this track's runs `run_dirs` to sample from, each with its judge's verdict
        when `calibrate sample`'s flags (`params`, by parameter name: system, judge, judge_cache,
        cache, concurrency, category, chart_judge, file_judge, file_judge_all, unsafe_local) give a
        judge, and how many were left out by reason. A flag this track does not take that was
        given is one UserError line."""
        ...

    def note(self, items: Sequence[CalibrationItem]) -> str | None:
        """A line `calibrate compute` prints under the numbers of these items (what a verdict
        means for them), or None."""
        ...
