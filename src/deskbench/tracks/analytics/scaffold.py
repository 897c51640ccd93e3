"""`deskbench init DIR --track analytics`: an analytics task set over the user's own
spreadsheets (the core's init command reaches it through Track.scaffolder; helpers in
deskbench/scaffold.py)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from deskbench.contract.cli import Scaffolded
from deskbench.scaffold import TODO, found_files, unique, write_readme
from deskbench.tasks.jsonl import write_jsonl

SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".csv")


def scaffold_analytics(dest: Path, source: Path | None, *, workers: int = 1,
                       on_file: Callable[[str], None] | None = None) -> Scaffolded:
    """Copy the spreadsheets into dest/inputs (their folders kept, so equal names do not collide)
    and write one TODO question per file that refers to it."""
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.analytics.tasks import AnalyticsTask

    root = source if source is not None else bundled_dir() / "analytics" / "inputs"
    sheets = found_files(root, SPREADSHEET_SUFFIXES, "spreadsheets",
                    "give a folder with .xlsx, .xlsm or .csv files (searched recursively)")
    tasks: list[AnalyticsTask] = []
    ids: set[str] = set()
    for path in sheets:
        relative = path.name if root.is_file() else path.relative_to(root).as_posix()
        target = dest / "inputs" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        if on_file:
            on_file(relative)
        tasks.append(AnalyticsTask(
            id=unique(re.sub(r"[^A-Za-z0-9]+", "-", Path(relative).with_suffix("").as_posix()).strip("-").lower()
                       or "sheet", ids),
            category="qa",
            instruction=f"{TODO}: ask a question about {Path(relative).name} whose answer is one figure or name.",
            inputs=[f"inputs/{relative}"],
            difficulty_steps=1,
            answer=f"{TODO}: the reference answer",
            computation=f"{TODO}: how the answer is computed from the file (for you and the judge)",
        ))
    write_jsonl(dest / "tasks.jsonl", tasks)
    command = ["deskbench", "run", "--tasks", str(dest / "tasks.jsonl"), "--agent", "analyst-agent",
               "--model", "local", "--max-rounds", "3", "--out", str(dest / "runs" / "analyst-local")]
    write_readme(dest, "analytics", [
        "inputs/      your spreadsheets, copied",
        "tasks.jsonl  one task a line, 1 per file; edit each TODO: instruction, answer",
        "             (and answer_value, a number, for a numeric answer), computation;",
        "             'category' may also be visualization or file_generation (see docs/formats.md)",
    ], command, "--model local runs a small model on this machine (no key; slow); give openai/... for a real one.")
    return Scaffolded(tasks=len(tasks), files=len(sheets), next_command=command)
