"""Seeded deliverables benchmark (the consulting DRA paper): one task package per folder,
`out/<task-id>/task.yaml` plus its input files, cycling through the prompt classes CRP, RCP,
SCP, LDP and FSP. Each package embeds cognitive traps (footnote overriding a headline figure,
lakh vs crore between tables, a stale placeholder superseded by a later file, a simple average
where weighting is required, minutes among hours), each paired with the verifiers that catch it;
LDP is an integer linear program (paper A.4) whose optimum scipy's MILP solver finds (ldp.py); golden answers are
computed from the numbers written into the inputs. Where a class ends in a decision (CRP, SCP,
LDP, FSP) each package draws which decision is right, about half each way, and builds its numbers
so that falling into the trap gives the other one: no class has a fixed answer to memorise.
One random.Random(seed) drives everything.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deskbench.tracks.deliverables.generate.finance import fsp_freight, scp_cost_json
from deskbench.tracks.deliverables.generate.ldp import ldp_integer_program
from deskbench.tracks.deliverables.generate.ops import crp_market_entry, rcp_contact_centre
from deskbench.tracks.deliverables.tasks import DeliverableTask, dump_task, load_package

Scenario = Callable[[random.Random, str, Path], DeliverableTask]
SCENARIOS: dict[str, Scenario] = {
    "CRP": crp_market_entry,
    "RCP": rcp_contact_centre,
    "SCP": scp_cost_json,
    "LDP": ldp_integer_program,  # the paper's A.4: an integer program solved at generation time
    "FSP": fsp_freight,
}


@dataclass
class DeliverablesReport:
    out: Path
    tasks: int
    by_class: dict[str, int]
    traps: dict[str, int]
    verifiers: int
    files: int


def generate_deliverables(out: Path, *, tasks: int, seed: int) -> DeliverablesReport:
    """`tasks` packages, prompt classes in SCENARIOS order; each is re-loaded to validate it."""
    rng = random.Random(seed)
    classes = list(SCENARIOS)
    by_class: dict[str, int] = {}
    traps: dict[str, int] = {}
    verifiers = 0
    for i in range(tasks):
        cls = classes[i % len(classes)]
        task_id = f"dl-{i + 1:04d}-{cls.lower()}"
        pkg = out / task_id
        pkg.mkdir(parents=True, exist_ok=True)
        task = SCENARIOS[cls](rng, task_id, pkg)
        (pkg / "task.yaml").write_text(dump_task(task), encoding="utf-8")
        loaded = load_package(pkg)
        by_class[cls] = by_class.get(cls, 0) + 1
        for trap in loaded.traps:
            traps[trap.kind] = traps.get(trap.kind, 0) + 1
        verifiers += len(loaded.verifiers)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    return DeliverablesReport(out=out, tasks=tasks, by_class=by_class, traps=traps,
                              verifiers=verifiers, files=files)
