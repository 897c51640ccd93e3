"""The echo track's part of the bundled demo (Track.demo), with its own flag of `deskbench demo`
(`--echo-limit`, declared here: the core builds it, contract/cli.py DemoFlag)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from deskbench.contract.cli import DemoContext, DemoFlag

ROWS = [("abc", "ABC"), ("Q", "q"), ("hi", "HI")]


class EchoDemo:
    """The echo leg: three tasks; `run` keeps the first --echo-limit (it runs no agent itself)."""

    flags = (DemoFlag("--echo-limit", 3, "echo: only the first N echo tasks."),)

    def __init__(self) -> None:
        self.seen: list[object] = []  # the --echo-limit each run was given (tests read it)

    def build(self, out: Path, seed: int) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "tasks.jsonl").write_text("".join(json.dumps({"id": f"e{i}", "text": t, "expected": e}) + "\n"
                                                 for i, (t, e) in enumerate(ROWS)))

    def run(self, context: DemoContext) -> Sequence[Path]:
        self.seen.append(context.flags["--echo-limit"])
        return []

    def show(self, section: object) -> None:
        pass


LEG = EchoDemo()
