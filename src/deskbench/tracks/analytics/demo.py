"""analytics' part of the bundled demo (Track.demo): the generated tasks `generate demo` builds,
analyst-agent in the sandbox on them (`deskbench demo`) and its report printed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from deskbench.console import err, out
from deskbench.contract.cli import DemoContext, DemoFlag

TASKS = 11  # every template once, the Chinese-label chart included


class AnalyticsDemo:
    """The analytics leg of the demo (contract/cli.py DemoLeg)."""

    # its flag of `deskbench demo` (the core adds it: cli/demo.py)
    flags = (DemoFlag("--analytics-limit", 2,
                      "With the local model: only the first N analytics tasks."),)

    def build(self, out: Path, seed: int) -> None:
        from deskbench.tracks.analytics.generate.tasks import generate_analytics

        generate_analytics(out, tasks=TASKS, seed=seed)

    def run(self, context: DemoContext) -> Sequence[Path]:
        """analyst-agent in the sandbox on the bundled analytics tasks (the first --analytics-limit
        with the local model, in 3 rounds). Skipped, with the reason, without bubblewrap."""
        from deskbench.models.settings import Sampling
        from deskbench.sandbox import SandboxUnavailable
        from deskbench.tracks.analytics.run import AnalyticsRunSpec, prepare_analytics
        from deskbench.tracks.analytics.tasks import read_tasks

        local, model = context.local, context.model
        limit = context.flags["--analytics-limit"] if local else None
        assert limit is None or isinstance(limit, int)
        tasks_file = context.bundle / "analytics" / "tasks.jsonl"
        tasks = read_tasks(tasks_file).items[:limit]
        spec = AnalyticsRunSpec(
            agent="analyst-agent", model=model, tasks_file=tasks_file,
            out=context.out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"analyst-agent-{model}-{len(tasks)}"),
            max_rounds=3 if local else 20, sampling=Sampling(max_tokens=512 if local else None),
            concurrency=1 if local else 4)
        try:
            prep = prepare_analytics(spec, tasks)
        except SandboxUnavailable as exc:
            err.print(f"[yellow]analytics skipped:[/yellow] {escape(str(exc))}")
            return []
        out.print(f"     analyst-agent with {escape(model)} on {len(tasks)} analytics tasks in the bubblewrap sandbox"
                  + (" (3 rounds each; --analytics-limit for more)" if local else ""))
        context.execute(prep, context.quiet)
        return [spec.out]

    def show(self, section: object) -> None:
        from deskbench.tracks.analytics.report import AnalyticsSection
        from deskbench.tracks.analytics.score_command import print_analytics_report

        if not isinstance(section, AnalyticsSection):
            raise TypeError(f"the analytics demo shows an AnalyticsSection, not a {type(section).__name__}")
        for analytics_report in section.systems:
            print_analytics_report(analytics_report)


LEG = AnalyticsDemo()
