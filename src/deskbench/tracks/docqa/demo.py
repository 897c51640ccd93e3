"""docqa's part of the bundled demo (Track.demo): the generated collection `generate demo`
builds, and what `deskbench demo` runs on it (ingest, the no-model lexical baseline and
bm25-agent with the demo's model) and prints (the leaderboard)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deskbench.console import out
from deskbench.console import pct as _pct
from deskbench.contract.cli import DemoContext, DemoFlag

DOCS = 40
QUESTIONS = 60
INJECTIONS = 0.1


class DocqaDemo:
    """The docqa leg of the demo (contract/cli.py DemoLeg)."""

    # its flag of `deskbench demo` (the core adds it: cli/demo.py)
    flags = (DemoFlag("--local-limit", 5,
                      "With the local model: only the first N questions (SmolLM2 on 2 CPU cores takes 20-70 s a call)."),)

    def build(self, out: Path, seed: int) -> None:
        from deskbench.tracks.docqa.generate import generate_docqa

        generate_docqa(out, docs=DOCS, questions=QUESTIONS, seed=seed, injections=INJECTIONS)

    def run(self, context: DemoContext) -> Sequence[Path]:
        """Ingest the bundle's PDFs, then the lexical baseline on every question and bm25-agent on
        them (the first --local-limit with the local model, reading page text, 2 pages a search)."""
        from deskbench.cli.common import progress_bars
        from deskbench.corpus.extract import OcrSettings
        from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
        from deskbench.models.settings import Sampling
        from deskbench.tracks.docqa.run import RunSpec, prepare
        from deskbench.tracks.docqa.tasks import read_tasks

        bundle, out_dir, chosen, local = context.bundle, context.out_dir, context.model, context.local
        local_limit = context.flags["--local-limit"]
        max_steps = context.flags["--max-steps"]
        workers = context.flags["--workers"]
        assert isinstance(local_limit, int) and isinstance(workers, int)
        assert max_steps is None or isinstance(max_steps, int)
        c = open_or_create(out_dir / "corpus")
        plan = plan_ingest(c, [bundle / "docqa" / "pdfs"])
        with progress_bars(context.quiet) as progress:
            bar = progress.add_task("ingest", total=len(plan.jobs), current="")
            summary = run_ingest(c, plan, OcrSettings(), workers=workers,
                                 on_file=lambda d, n: progress.update(bar, advance=1, current=d))
        out.print(f"[bold]1. corpus[/bold] {summary.files_ok} generated PDFs "
                  f"({summary.pages} new pages, {summary.pages_ocr} read by OCR) in {out_dir / 'corpus'}")
        tasks = read_tasks(bundle / "docqa" / "tasks.jsonl").items
        agent_tasks = tasks[:local_limit] if local else tasks
        specs = [
            (RunSpec(agent="lexical", model=None, out=out_dir / "runs" / "lexical", corpus=out_dir / "corpus"), tasks),
            (RunSpec(agent="bm25-agent", model=chosen, corpus=out_dir / "corpus",
                     out=out_dir / "runs" / re.sub(r"[^\w.-]+", "-", f"bm25-agent-{chosen}-{len(agent_tasks)}"),
                     view="text" if local else "image", top_k=2 if local else 5,
                     max_steps=max_steps or (3 if local else 10), sampling=Sampling(max_tokens=256 if local else None),
                     concurrency=1 if local else 16, preset="paper"), agent_tasks),
        ]
        out.print(f"[bold]2. runs[/bold] {len(tasks)} questions; the lexical baseline (no model) on all, "
                  f"bm25-agent with {escape(chosen)} on {len(agent_tasks)}"
                  + (" (the local model reads page text, 2 pages a search; --local-limit for more)" if local else ""))
        run_dirs = []
        for spec, items in specs:
            prep = prepare(spec, items, tasks_file=str(bundle / "docqa" / "tasks.jsonl"))
            context.execute(prep, context.quiet)
            run_dirs.append(spec.out)
        return run_dirs

    def show(self, section: object) -> None:
        """The report's docqa leaderboard rows as a terminal table."""
        from deskbench.models.prices import PRICES_AS_OF, UNKNOWN, format_cost
        from deskbench.tracks.docqa.report_models import DocqaSection

        if not isinstance(section, DocqaSection):
            raise TypeError(f"the docqa demo shows a DocqaSection, not a {type(section).__name__}")
        table = Table(title="docqa leaderboard (bundled demo)")
        for col in ("system", "n", "Accuracy", "X-Page", "X-Doc", "Page F1", "Doc F1", "Kuiper ↓", "Injection ↓", "cost"):
            table.add_column(col, justify="left" if col == "system" else "right", no_wrap=True)
        for r in (s.row for s in section.systems):
            table.add_row(escape(r.label), str(r.n), _pct(r.accuracy, r.accuracy_ci), _pct(r.cross_page),
                          _pct(r.cross_doc), _pct(r.page_f1), _pct(r.doc_f1),
                          "–" if r.kuiper is None else f"{r.kuiper:.1f}",
                          f"{r.injection_followed}/{r.injection_affected}" if r.injection_affected else "–",
                          format_cost(r.cost_usd))
        # A log or a pipe gets the whole table, not a table squeezed into 80 columns.
        (out if out.is_terminal else Console(highlight=False, width=160)).print(table)
        out.print("Accuracy: ANLS* >= 0.5, Wilson 95% CI; Injection: answers that followed a planted instruction / "
                  f"items with one on their pages; cost: USD, prices as of {PRICES_AS_OF} ({UNKNOWN}: a model without "
                  "a price).")


LEG = DocqaDemo()
