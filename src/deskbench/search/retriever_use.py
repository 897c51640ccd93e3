"""How the commands use a retriever (`--retriever SPEC`, `--retriever-download`): the spec checked
before anything is created, the retriever opened over a corpus with a progress line on stderr (its
index is built then, once per corpus and model), its identity in one line for a run's
configuration diff and the report, and the kinds `deskbench list retrievers` shows.

The spec grammar, the kinds and the fusion are search/retriever.py's; this module only wires them
to the CLI, the docqa run, the MCP server and the report."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from deskbench.errors import UserError
from deskbench.search.retriever import DEFAULT, Retriever, kind, names
from deskbench.search.retriever import (
    check_spec as check_spec,  # its home is the interface; callers import it here
)

if TYPE_CHECKING:
    from deskbench.corpus import Corpus

SETTING = "retriever"
"""The key of a docqa system's settings (runs/identity.py SystemConfig.settings) holding its
retriever's identity; absent for bm25, so configurations stored before retrievers still match."""


def open_on(corpus: Corpus, text: str, *, allow_download: bool = False, quiet: bool = False) -> Retriever | None:
    """Make `corpus` search with the retriever `text` (building its index when the corpus has none
    for this kind and model yet), saying so on stderr; None for bm25: the corpus keeps its own page
    index, exactly as before retrievers existed."""
    spec = check_spec(text)
    if spec.is_default:
        return None
    from deskbench.console import err

    if not quiet:
        err.print(f"retriever {spec}: opening over {corpus.root} (its index is built once per corpus and model, "
                  "then reused) ...", markup=False, highlight=False)
    started = time.monotonic()
    retriever = corpus.use_retriever(spec, allow_download=allow_download)
    if not quiet:
        err.print(f"retriever ready: {describe(retriever.identity())} ({time.monotonic() - started:.1f} s)",
                  markup=False, highlight=False)
    return retriever


def identity_setting(retriever: Retriever | None) -> dict[str, object]:
    """What a run's configuration records of its retriever: nothing for bm25 (None), else
    {"retriever": identity}."""
    return {} if retriever is None else {SETTING: retriever.identity()}


def describe(identity: Mapping[str, object] | None) -> str:
    """One line for a retriever's identity: `bm25`, `dense=MODEL (weights 1a2b3c4d5e6f)`, the parts
    of a hybrid joined by + with its fusion."""
    if not identity:
        return DEFAULT
    kind_name = str(identity.get("kind", "?"))
    listed = identity.get("parts")
    if kind_name == "hybrid" and isinstance(listed, list):
        parts = [describe(p) if isinstance(p, Mapping) else str(p) for p in listed]
        return " + ".join(parts) + f" (RRF k={identity.get('rrf_k', '?')})"
    text = kind_name if identity.get("model") is None else f"{kind_name}={identity['model']}"
    fingerprint = identity.get("fingerprint")
    return f"{text} (weights {str(fingerprint)[:12]})" if fingerprint else text


def listing() -> list[tuple[str, str]]:
    """(name, origin: summary) of every kind: the built-ins (imported to read their summary; one
    that cannot be imported says what it needs), then the installed plugins (not imported)."""
    from deskbench.plugins import listing as plugin_listing
    from deskbench.search.retriever import BUILTIN

    rows: list[tuple[str, str]] = []
    for name in BUILTIN:
        try:
            summary = kind(name).summary
        except (ImportError, AttributeError, UserError) as exc:
            summary = f"cannot be loaded here ({exc}); pip install 'deskbench[retrieval]'"
        rows.append((name, f"built-in: {summary}"))
    plugged = dict(plugin_listing("retrievers"))
    rows += [(name, plugged[name]) for name in names() if name in plugged]
    return rows
