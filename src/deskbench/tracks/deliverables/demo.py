"""deliverables' part of the bundled demo (Track.demo): the generated packages `generate demo`
builds, deliverable-agent in the sandbox on them and its rubric grades (`deskbench demo`), and
the summary printed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from deskbench.console import err, out
from deskbench.contract.cli import DemoContext, DemoFlag

if TYPE_CHECKING:
    from deskbench.tracks.deliverables.scoring.rubric_run import GradingCounts

TASKS = 5


class DeliverablesDemo:
    """The deliverables leg of the demo (contract/cli.py DemoLeg)."""

    # its flag of `deskbench demo` (the core adds it: cli/demo.py)
    flags = (DemoFlag("--deliverables-limit", 1,
                      "With the local model: only the first N deliverables packages."),)

    def build(self, out: Path, seed: int) -> None:
        from deskbench.tracks.deliverables.generate.packages import generate_deliverables

        generate_deliverables(out, tasks=TASKS, seed=seed)

    def run(self, context: DemoContext) -> Sequence[Path]:
        """deliverable-agent in the sandbox on the bundled packages (the first --deliverables-limit
        with the local model, 2 rounds), graded on the rubric by the same model (a real grader
        call; with the local model the grades say little), then scored. Skipped, with the reason,
        without bubblewrap."""
        import asyncio

        from deskbench.models.registry import open_model
        from deskbench.models.settings import Sampling
        from deskbench.sandbox import SandboxUnavailable
        from deskbench.tracks.deliverables.grades import GradeStore
        from deskbench.tracks.deliverables.run import (
            DeliverablesRunSpec,
            SystemSpec,
            prepare_deliverables,
        )
        from deskbench.tracks.deliverables.scoring.rubric_run import episodes_to_grade, grade_run
        from deskbench.tracks.deliverables.tasks import load_packages

        local, model = context.local, context.model
        limit = context.flags["--deliverables-limit"] if local else None
        assert limit is None or isinstance(limit, int)
        packages = context.bundle / "deliverables"
        ids = [t.id for t in load_packages(packages)][:limit]
        spec = DeliverablesRunSpec(
            systems=(SystemSpec("deliverable-agent", model),), packages=packages, only_tasks=tuple(ids),
            out=context.out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"deliverable-agent-{model}-{len(ids)}"),
            max_rounds=2 if local else 20, sampling=Sampling(max_tokens=512 if local else None),
            inline_chars=2500 if local else 24_000, concurrency=1 if local else 2)
        try:
            prep = prepare_deliverables(spec)
        except SandboxUnavailable as exc:
            err.print(f"[yellow]deliverables skipped:[/yellow] {escape(str(exc))}")
            return []
        out.print(f"     deliverable-agent with {escape(model)} on {len(ids)} deliverables packages in the sandbox"
                  + (" (2 rounds each; --deliverables-limit for more)" if local else ""))
        context.execute(prep, context.quiet)
        grades = GradeStore(spec.out)
        grader = open_model(model, role="judge", concurrency=1 if local else 4, cache=True,
                            sampling=Sampling(max_tokens=768) if local else None)
        todo, _ = episodes_to_grade(grades, grader.id)

        async def go() -> GradingCounts:
            try:
                return await grade_run(grades, grader, todo, concurrency=1 if local else 4)
            finally:
                await grader.aclose()

        counts = asyncio.run(go())
        grades.close()
        out.print(f"     rubric graded by {escape(grader.id)}: {counts.graded} graded, {counts.failed} could not be graded"
                  + (" (a 135M model is a poor grader: this shows the pipeline, not a verdict)" if local else ""))
        return [spec.out]

    def show(self, section: object) -> None:
        from deskbench.tracks.deliverables.report import DeliverablesSection
        from deskbench.tracks.deliverables.scoring.deliverables_print import print_summary

        if not isinstance(section, DeliverablesSection):
            raise TypeError(f"the deliverables demo shows a DeliverablesSection, not a {type(section).__name__}")
        print_summary(section.report, out)


LEG = DeliverablesDemo()
