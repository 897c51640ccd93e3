"""`--batch-api` on `run` and `score`: the command's model calls through the providers' batch APIs
(models/batch/), remembered in the run store so a killed command resumes its batches.

The flag changes no request, only how it is sent and priced: a batched call is the same body
the provider would get one by one, at its batch price. So it is not part of a system's identity
or protocol (a run may be resumed with or without it); what went through batches is kept in the
run store's meta ("batch") and in each call's transcript entry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from deskbench.errors import UserError

if TYPE_CHECKING:
    import typer

    from deskbench.models.batch.base import BatchJournal, BatchMode

BATCH_CONCURRENCY = 256
"""`run --batch-api` without --concurrency (episodes in flight) and `score --batch-api` without
--judge-concurrency: so that a batch gathers this many calls (16 in flight would make batches of
16, each waiting up to the provider's window)."""

META_KEY = "batch"

HELP_RUN = "Model calls through the provider's batch API: half price, slower (docs/batch.md)."
HELP_SCORE = "Judge calls through the provider's batch API: half price, slower (docs/batch.md)."


def check(models: Sequence[str], *, what: str) -> None:
    """Every model a batch would serve has a batch API in deskbench (one line, exit 2, if not)."""
    from deskbench.models.batch.base import batch_provider
    from deskbench.models.registry import parse_spec

    if not models:
        raise UserError(f"--batch-api batches the {what}'s calls, and this command has none; give --judge MODEL or "
                        "drop --batch-api")
    for spec in models:
        batch_provider(parse_spec(spec).id)


def run_concurrency(ctx: typer.Context, batch: bool, concurrency: int, executor: str = "local") -> int:
    """Under --batch-api, BATCH_CONCURRENCY unless the command's concurrency flag was given: the
    episodes in flight (`run --concurrency`), or the items a scorer judges at once (`score
    --judge-concurrency`: analytics and deliverables bound them by it), so a batch gathers them."""
    if not batch:
        return concurrency
    if executor != "local":
        raise UserError("--batch-api is for --executor local (its batches are gathered in this process); drop --batch-api "
                        "or --executor")
    source = ctx.get_parameter_source("concurrency")
    if source is None or source.name == "DEFAULT":
        return BATCH_CONCURRENCY
    return concurrency


@contextlib.contextmanager
def batching(batch: bool, roles: Sequence[str], journal: BatchJournal | None = None) -> Iterator[BatchMode | None]:
    """The batch mode for the block (None without --batch-api): models opened inside it batch."""
    if not batch:
        yield None
        return
    from deskbench.models.batch.base import batch_mode

    with batch_mode(journal, roles) as mode:
        yield mode


def start(ctx: typer.Context, batch: bool, roles: Sequence[str], journal: BatchJournal | None) -> BatchMode | None:
    """`batching` for the rest of the command (it ends with the command's context)."""
    return ctx.with_resource(batching(batch, roles, journal))


def names(judge: str | Sequence[str] | None) -> list[str]:
    """The --judge models given (one, or a repeated flag's)."""
    return [judge] if isinstance(judge, str) else list(judge or [])


def finish(mode: BatchMode | None, store: BatchJournal) -> None:
    """Record what went through batches in the run store and say it on stderr, one line a model."""
    if mode is None or not mode.models:
        return
    from deskbench.console import err

    known = store.meta(META_KEY)
    record: dict[str, object] = dict(known) if isinstance(known, dict) else {}
    for model, now in mode.record().items():
        before = record.get(model)
        if isinstance(before, dict) and isinstance(now, dict):
            now = {**now, **{k: _merged(before.get(k), now.get(k)) for k in ("batched", "individual", "batches",
                                                                             "resumed")}}
        record[model] = now
    store.set_meta(META_KEY, record)
    for line in mode.summary():
        err.print(f"--batch-api: {line}")


def _merged(before: object, now: object) -> object:
    """A count or a list of ids over every command that batched on this run."""
    if isinstance(before, int) and isinstance(now, int):
        return before + now
    if isinstance(before, list) and isinstance(now, list):
        return before + [x for x in now if x not in before]
    return now
