"""`deskbench diagnose`: failure categories per system, every track (runs/diagnose.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from deskbench.console import out
from deskbench.errors import UserError


def register(app: typer.Typer) -> None:
    """Add `deskbench diagnose`."""

    @app.command()
    def diagnose(
        run_dir: Annotated[Path, typer.Argument(help="A run directory (the --out of 'deskbench run').")],
        episodes: Annotated[bool, typer.Option("--episodes", help="Also list every failed episode with its category.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")] = False,
    ) -> None:
        """Failure categories per system, every track (timeouts, refusals, step and round limits,
        no answer, files not produced, file generation failures by cause), with cost and the share of
        episodes that produced what they must ('success': an answer, the required files; not accuracy)."""
        from deskbench.models.prices import UNKNOWN, format_cost
        from deskbench.runs.diagnose import categories
        from deskbench.runs.diagnose import diagnose as run_diagnose
        from deskbench.runs.store import RunStore, task_id

        store = RunStore(run_dir, create=False)
        eps = store.episodes()
        if not eps:
            raise UserError(f"the run in {run_dir} has no episodes yet; run 'deskbench run' first")
        track = store.track()
        tasks = {task_id(t): t for t in store.all_tasks()}
        result = run_diagnose(eps, tasks, track=track)
        if as_json:
            print(json.dumps(result.model_dump(mode="json", exclude={} if episodes else {"episodes"}), indent=2))
            return
        order = categories(track)
        shown = [*order, *sorted({c for s in result.systems for c in s.categories} - set(order))]
        seen = [c for c in shown if any(c in s.categories for s in result.systems)]
        table = Table(title=f"diagnose {run_dir}")
        for col in ("system", "episodes", "success", *seen, "cost $", "$ per ok", "tokens in/out"):
            table.add_column(col, justify="left" if col == "system" else "right")
        for s in result.systems:
            table.add_row(escape(s.system), str(s.episodes), f"{100 * s.success_rate:.1f}%",
                          *(str(s.categories.get(c, 0)) for c in seen),
                          format_cost(s.cost_usd, dollar=False),
                          UNKNOWN if not s.cost_known and s.ok else
                          "-" if s.cost_per_ok_usd is None else format_cost(s.cost_per_ok_usd, dollar=False),
                          f"{s.input_tokens}/{s.output_tokens}")
        out.print(table)
        out.print(f"cost: USD, prices as of {result.prices_as_of} ({UNKNOWN}: an episode called a model without a "
                  "price; 'deskbench run --prices FILE' prices such a model)")
        if episodes:
            for d in result.episodes:
                if d.category != "ok":
                    last, _, tail = d.detail.partition("\n")  # an error's last line, then its tail
                    out.print(f"{escape(d.system)} {escape(d.task_id)}#{d.attempt}: [bold]{d.category}[/bold] "
                              f"{escape(last)}")
                    if tail:
                        out.print(escape("\n".join(f"    {line}" for line in tail.splitlines())), style="dim",
                                  highlight=False)
