"""One provider store per corpus content, recorded in the corpus folder.

A store is named `deskbench-<key>`, the key a hash of the corpus's documents (each id and content
hash), so two corpora never share a store and a rerun on the same corpus finds its store (and its
files) instead of uploading again. What deskbench made at a provider (store, files, assistant) is
written to <corpus>/managed_rag/stores.json, one record per service and endpoint, so that
`deskbench stores delete` can remove exactly that and nothing else."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.store import now

RECORDS = Path("managed_rag") / "stores.json"


def corpus_key(corpus: Corpus) -> str:
    """sha256 of the corpus's documents: each id and content hash, in id order."""
    digest = hashlib.sha256()
    for doc in sorted(corpus.documents(), key=lambda d: d.doc_id):
        digest.update(f"{doc.doc_id}\t{doc.content_hash}\n".encode())
    return digest.hexdigest()


def store_name(key: str) -> str:
    return f"deskbench-{key[:16]}"


class StoreRecord(BaseModel):
    """A store deskbench uses for one corpus at one service's endpoint."""

    service: str  # the agent's name: openai-file-search, gemini-file-search
    endpoint: str  # the API's base URL (a simulator's in the tests)
    name: str  # the name deskbench gave it (OpenAI `name`, Gemini `displayName`)
    id: str  # the provider's id (vs_..., fileSearchStores/...)
    corpus_key: str
    created: bool = True  # made by deskbench (False: found by name, made elsewhere)
    files: dict[str, str] = Field(default_factory=dict)  # document id -> the provider's file / document
    assistant_id: str | None = None  # OpenAI: the assistant answering from the store
    size_bytes: int = 0  # the store's size as the provider last reported it
    created_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)


class Records(BaseModel):
    stores: list[StoreRecord] = Field(default_factory=list)


def _path(root: Path) -> Path:
    return root / RECORDS


def read_records(root: Path) -> Records:
    path = _path(root)
    if not path.exists():
        return Records()
    try:
        return Records.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        raise UserError(f"{path} is unreadable ({type(exc).__name__}); it lists the managed-RAG stores deskbench "
                        "made for this corpus: fix or delete it (the stores stay at the provider)") from exc


def _write(root: Path, records: Records) -> None:
    path = _path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".stores.", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(records.model_dump(mode="json"), fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def find(root: Path, service: str, endpoint: str, key: str) -> StoreRecord | None:
    return next((r for r in read_records(root).stores
                 if r.service == service and r.endpoint == endpoint and r.corpus_key == key), None)


def save(root: Path, record: StoreRecord) -> None:
    """Add or replace the record of (service, endpoint, store id)."""
    records = read_records(root)
    record.updated_at = now()
    records.stores = [r for r in records.stores
                      if not (r.service == record.service and r.endpoint == record.endpoint and r.id == record.id)]
    records.stores.append(record)
    _write(root, records)


def forget(root: Path, record: StoreRecord) -> None:
    records = read_records(root)
    records.stores = [r for r in records.stores
                      if not (r.service == record.service and r.endpoint == record.endpoint and r.id == record.id)]
    _write(root, records)
