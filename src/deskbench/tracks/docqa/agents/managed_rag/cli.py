"""`deskbench stores list|delete [SERVICE] --corpus DIR`: the managed-RAG stores deskbench made for a corpus
(stores.py records them in the corpus folder), what they hold and cost, and their deletion at the
provider (store, uploaded files, assistant). The provider's key and endpoint are read as the agents
read them (OPENAI_API_KEY / OPENAI_BASE_URL; GEMINI_API_KEY or GOOGLE_API_KEY / GOOGLE_GEMINI_BASE_URL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from deskbench.cli.common import CorpusOpt, JsonOpt
from deskbench.console import out
from deskbench.errors import UserError

SERVICES = ("openai-file-search", "gemini-file-search")
# the module of each service, with its delete_store(record) and storage_cost_per_day(record)
MODULES = {"openai-file-search": "deskbench.tracks.docqa.agents.managed_rag.openai_fs",
           "gemini-file-search": "deskbench.tracks.docqa.agents.managed_rag.gemini_fs"}

ServiceArg = Annotated[str | None, typer.Argument(metavar="[SERVICE]", help=f"Only this service's stores: {' | '.join(SERVICES)}.")]


def _service(name: str) -> Any:
    import importlib

    return importlib.import_module(MODULES[name])


def register(app: typer.Typer) -> None:
    stores = typer.Typer(help="The managed-RAG stores deskbench made for a corpus (list, delete).", no_args_is_help=True)
    stores.command("list")(list_cmd)
    stores.command("delete")(delete_cmd)
    app.add_typer(stores, name="stores")


def _records(corpus: Any, service: str | None) -> list[Any]:
    from deskbench.errors import one_of
    from deskbench.paths import require_corpus
    from deskbench.tracks.docqa.agents.managed_rag.stores import read_records

    require_corpus(corpus, "--corpus")
    if service is not None:
        one_of(service, SERVICES, "the service")
    return [r for r in read_records(corpus).stores if service is None or r.service == service]


def list_cmd(corpus: CorpusOpt, service: ServiceArg = None, json_out: JsonOpt = False) -> None:
    """The stores deskbench made for the corpus: service, id, files, size and storage cost a day."""
    rows = []
    for r in _records(corpus, service):
        per_day: Callable[[Any], float] = _service(r.service).storage_cost_per_day
        rows.append({"service": r.service, "endpoint": r.endpoint, "name": r.name, "id": r.id, "files": len(r.files),
                     "size_bytes": r.size_bytes, "storage_usd_per_day": per_day(r), "created_at": r.created_at})
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        out.print(f"no managed-RAG store recorded for {corpus}")
        return
    for row in rows:
        out.print(f"{row['service']}  {row['id']}  {row['name']}  {row['files']} files  {row['size_bytes']} bytes  "
                  f"${row['storage_usd_per_day']:.4f}/day  ({row['endpoint']})")


def delete_cmd(corpus: CorpusOpt, service: ServiceArg = None) -> None:
    """Delete the stores deskbench made for the corpus (with their uploaded files and assistant)."""
    from deskbench.tracks.docqa.agents.managed_rag.stores import forget

    records = _records(corpus, service)
    if not records:
        out.print(f"no managed-RAG store recorded for {corpus}: nothing to delete")
        return
    for r in records:
        try:
            done = _service(r.service).delete_store(r)
        except Exception as exc:  # the SDK's or the API's error, as one line
            message = (getattr(exc, "message", None) or str(exc)).splitlines()[0]
            raise UserError(f"deleting {r.service} store {r.id} at {r.endpoint} failed ({message}); check the "
                            "key and endpoint in the environment, then run `deskbench stores delete` again") from exc
        forget(corpus, r)
        out.print(f"deleted {r.service} store {r.id} ({len(done)} objects: {', '.join(done) or 'already gone'})")
