"""`dense=MODEL`: one vector per page from a sentence-transformers model, ranked by cosine.

The page's text is embedded as the model embeds a document (its own non-empty "document" prompt,
else "passage" or "corpus", as e5-style models name it; its own maximum length, longer pages
truncated), the query as it embeds a query (its "query" prompt: snowflake-arctic-embed-m-v2.0 has
one), both normalised, so the dot product is the cosine similarity. The vectors are stored with the corpus (store.py), built once per model.

The model is read from a local folder or the local Hugging Face cache only; nothing is fetched
unless the run allows it (`--retriever-download`). A model's own code from the hub is never run
(`trust_remote_code` stays off): a model needs an architecture this transformers knows.
snowflake-arctic-embed-m-v2.0 is one: its config's model_type "gte" and new-impl weight names are
read by transformers' own GteModel, its auto_map ignored (tests/search/test_arctic_layout.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from deskbench.errors import UserError
from deskbench.search.embedded import store
from deskbench.search.retriever import PageSource, Retriever, index_folder, model_fingerprint

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

    from deskbench.search.index import ScoredPage

BATCH = 16  # pages per encode call while building an index


# -- shared by the embedding kinds: where a model is, and where it runs -------------------------


def model_folder(kind: str, model: str, *, allow_download: bool = False) -> Path:
    """The local folder of `model`: the folder itself when it is one, else the snapshot of that hub
    name in the local Hugging Face cache (fetched first only when `allow_download`). One line
    naming the model and how to get it otherwise. Every embedding kind comes here before it loads,
    so this is where transformers' per-load "Loading weights" bar is turned off: deskbench prints
    one progress line of its own per index, and a run's stderr is read by people."""
    from transformers.utils import logging as transformers_logging

    quiet: Callable[[], None] = transformers_logging.disable_progress_bar  # unannotated in transformers
    quiet()
    path = Path(model).expanduser()
    spec = f"--retriever {kind}={model}"
    if path.exists() and not path.is_dir():
        raise UserError(f"{spec}: {path} is a file, not a model folder; give the folder that holds the "
                        "model's config.json")
    return local_model(model, spec, allow_download=allow_download, download_flag="--retriever-download")


def local_model(model: str, label: str, *, allow_download: bool, download_flag: str) -> Path:
    """`model` as a folder, else that hub name's snapshot in the local Hugging Face cache, fetched
    first only when `allow_download`; anything else one line starting with `label` (the command's
    words for it), with `download_flag` the way to fetch. The one lookup of a local model:
    the retrievers and `deskbench convert` both come here."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise UserError(f"{label}: no model folder at {path}, which is not a folder; give an existing folder, "
                        "or a hub name (org/name) already in the local Hugging Face cache")
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id=model, local_files_only=not allow_download))
    except LocalEntryNotFoundError:
        raise UserError(f"{label} is missing: no model folder at {path}, and {model!r} is not in the local "
                        f"Hugging Face cache ({constants.HF_HUB_CACHE}); give an existing folder, or fetch the model "
                        f"with `huggingface-cli download {model}` (or add {download_flag})") from None
    except HFValidationError:
        raise UserError(f"{label}: {model!r} is neither a model folder nor a hub name (org/name); give an "
                        "existing folder or a hub name") from None
    except (OSError, ValueError) as exc:  # the hub refused or was unreachable while downloading
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{label}: fetching {model!r} from the Hugging Face hub failed ({first}); check the "
                        f"name and the network, or download it by hand: huggingface-cli download {model}") from None


def torch_device() -> str:
    """Where the embedding models run: the GPU when torch sees one, else the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def progress_line(spec: str, total: int) -> Callable[[int, int], None]:
    """A progress report on stderr while an index is built (the run's output stays clean)."""
    def report(done: int, todo: int) -> None:
        end = "\n" if done >= todo else "\r"
        print(f"indexing {total} pages for --retriever {spec}: embedded {done}/{todo} new pages", end=end,
              file=sys.stderr, flush=True)
    return report


# -- dense -------------------------------------------------------------------------------------


def _load(spec: str, folder: Path) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(str(folder), device=torch_device(), local_files_only=True,
                                    trust_remote_code=False)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--retriever {spec}: the model at {folder} does not load as a sentence-transformers "
                        f"model ({first[:300]}); give a sentence-transformers folder (modules.json) or a "
                        "transformers model folder whose architecture needs no code of its own") from None
    refuse_unloaded(model, spec, folder)
    return model


def refuse_unloaded(model: torch.nn.Module, spec: str, folder: object) -> None:
    """One line when a load left weights at random (`unloaded_weights`): every embedding kind
    calls it on what it loaded."""
    missing = unloaded_weights(model)
    if missing:
        raise UserError(f"--retriever {spec}: the model at {folder} has no weights for {len(missing)} of its "
                        f"parameters ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}), which "
                        "transformers would fill with random values; its checkpoint is not this architecture's "
                        "(give the model's own folder, as its authors saved it)")


def unloaded_weights(model: torch.nn.Module) -> list[str]:
    """The parameters a load left at their random initialisation: transformers marks every weight
    it read from the checkpoint (or tied to one) `_is_hf_initialized` and only logs the rest, so a
    checkpoint of another layout would give embeddings of random weights under the model's name.
    An unused pooler (sentence-transformers pools itself) is not a loss."""
    return [name for name, param in model.named_parameters()
            if not getattr(param, "_is_hf_initialized", False) and ".pooler." not in f".{name}"]


def _prompt(model: SentenceTransformer, names: Sequence[str]) -> str:
    """The model's own prompt for the first of `names` it has (as encode_query/encode_document
    choose it), "" when none."""
    return next((str(model.prompts[n]) for n in names if model.prompts.get(n)), "")


class DenseRetriever:
    """A sentence-transformers model over the corpus's page texts."""

    def __init__(self, corpus: PageSource, model: str, *, allow_download: bool = False) -> None:
        spec = f"dense={model}"
        folder = model_folder("dense", model, allow_download=allow_download)
        self.model_name = model
        self.encoder = _load(spec, folder)
        self.fingerprint = model_fingerprint(folder)
        self.query_prompt = _prompt(self.encoder, ("query",))
        self.document_prompt = _prompt(self.encoder, ("document", "passage", "corpus"))
        dims = self.encoder.get_embedding_dimension()
        self.dims = int(dims) if dims is not None else len(self._encode([""], self.document_prompt)[0])
        self.max_seq_length = self.encoder.max_seq_length
        options: dict[str, object] = {"prompts": self.prompts, "max_seq_length": self.max_seq_length, "normalised": True}
        self.vectors = self._build(corpus, spec, options)

    @property
    def prompts(self) -> dict[str, str]:
        return {"query": self.query_prompt, "document": self.document_prompt}

    def _encode(self, texts: Sequence[str], prompt: str) -> store.F32:
        out = self.encoder.encode(list(texts), prompt=prompt, batch_size=BATCH, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    def _build(self, corpus: PageSource, spec: str, options: dict[str, object]) -> store.PageVectors:
        keys = corpus.page_keys()
        identity = {"kind": "dense", "fingerprint": self.fingerprint, "dims": self.dims, **options}

        def embed(batch: Sequence[store.Key]) -> list[store.F32]:
            texts = corpus.page_texts([(doc, page) for doc, page, _ in batch])
            return [row[None, :] for row in self._encode(texts, self.document_prompt)]

        folder = index_folder(corpus, "dense", self.fingerprint, options)
        return store.build(folder, keys, embed, identity, batch_size=BATCH, progress=progress_line(spec, len(keys)))

    def embed_query(self, query: str) -> store.F32:
        """The query's unit vector (the model's query prompt prepended)."""
        vector: store.F32 = self._encode([query], self.query_prompt)[0]
        return vector

    def search(self, query: str, k: int) -> list[ScoredPage]:
        from deskbench.search.index import ScoredPage

        if k < 1 or not self.vectors.keys:
            return []
        hits = self.vectors.top_k_dot(self.embed_query(query), k)
        return [ScoredPage(self.vectors.keys[i][0], self.vectors.keys[i][1], score) for i, score in hits]

    def identity(self) -> dict[str, object]:
        return {"kind": "dense", "model": self.model_name, "fingerprint": self.fingerprint, "dims": self.dims,
                "prompts": self.prompts, "max_seq_length": self.max_seq_length, "similarity": "cosine"}


class _DenseKind:
    name = "dense"
    needs_model = True
    summary = ("one vector per page from a sentence-transformers model (its query/document prompts), "
               "ranked by cosine similarity")

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        if model is None:
            raise UserError("--retriever dense needs a model: give dense=MODEL (a local folder, or a hub name "
                            "already downloaded)")
        return DenseRetriever(corpus, model, allow_download=allow_download)


DENSE = _DenseKind()
