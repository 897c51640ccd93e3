"""Which text embedding the analyses that measure semantic distance use (MADQA H.1 multi-hop
distance, H.6 query drift), chosen by `--embedding`.

The paper embeds with Snowflake Arctic Embed (`Snowflake/snowflake-arctic-embed-m-v2.0`), and its
distance bins (0-0.15 ... 0.6+) assume that embedding. So it is the default whenever it is on this
machine (a folder, or the local Hugging Face cache); it is fetched only with `--embedding-download`.
Without it the command falls back to what it used before (TF-IDF), and says so in its output and in
the report's `embedding` field, so a figure on another embedding is never taken for the paper's.

`--embedding` takes a sentence-transformers model (a folder or a hub name) or one of the light
methods by name: `tfidf`, or `minilm` (the numpy all-MiniLM-L6-v2 of the `embeddings` extra).
A model is loaded as dense.py loads a retriever's (sentence-transformers, local files only, no
code from the hub, on the GPU when torch sees one); texts are embedded with the model's own prompt
for their role (queries with its "query" prompt, pages with its document prompt), normalised, so
1 - dot is the cosine distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.tracks.docqa.analysis.textsim import Embedder

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PAPER_MODEL = "Snowflake/snowflake-arctic-embed-m-v2.0"
LIGHT = {"tfidf": "TF-IDF (numpy)", "minilm": "sentence-transformers/all-MiniLM-L6-v2 (numpy)"}
Role = Literal["query", "document"]
_PROMPTS: dict[Role, tuple[str, ...]] = {"query": ("query",), "document": ("document", "passage", "corpus")}


class EmbeddingUsed(BaseModel):
    """What embedded the texts, as the report records it."""

    embedding: str  # "tfidf", "minilm", or the model (hub name or folder)
    description: str  # readable: the model's name and where it was read from
    revision: str | None = None  # the hub snapshot's commit, when read from the Hugging Face cache
    prompts: dict[str, str] = {}  # the model's prompt used for each role ("" when none)
    fallback: str | None = None  # set when the paper's model was wanted but not used, with why

    def line(self) -> str:
        """One line for stderr."""
        if self.fallback:
            return f"embedding: {self.fallback}"
        paper = " (the paper's)" if self.embedding == PAPER_MODEL else ""
        return f"embedding: {self.description}{paper}"


@dataclass
class EmbeddingChoice:
    """The chosen embedding: `embedder(role)` gives the texts' rows (None: TF-IDF, fitted by the caller)."""

    used: EmbeddingUsed
    model: SentenceTransformer | None = None
    light: Embedder | None = None
    _prompts: dict[str, str] = field(default_factory=dict)

    @property
    def method(self) -> str:
        """The short name the reports' `method` field has always held ("tfidf", "minilm") or the model."""
        return self.used.embedding

    def embedder(self, role: Role) -> Embedder | None:
        if self.model is None:
            return self.light
        model, prompt = self.model, self._prompts.get(role, "")

        def embed(texts: Sequence[str]) -> npt.NDArray[np.float64]:
            unique = list(dict.fromkeys(texts))  # agents repeat queries: each distinct text once
            if not unique:
                return np.zeros((0, 0))
            rows = model.encode(unique, prompt=prompt, batch_size=16, normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False)
            matrix = np.asarray(rows, dtype=np.float64).reshape(len(unique), -1)
            index = {t: i for i, t in enumerate(unique)}
            return matrix[[index[t] for t in texts]]

        return embed


def _light(name: str, fallback: str | None = None) -> EmbeddingChoice:
    light: Embedder | None = None
    if name == "minilm":
        from deskbench.tracks.docqa.analysis.embeddings import load_minilm

        light = load_minilm()
    return EmbeddingChoice(EmbeddingUsed(embedding=name, description=LIGHT[name], fallback=fallback), light=light)


def local_model(model: str, *, allow_download: bool, flag: str = "--embedding") -> Path | None:
    """The folder of `model`: the folder itself, else its snapshot in the local Hugging Face cache
    (fetched first only when `allow_download`); None when it is a hub name not on this machine.
    A name that is neither, or a failed download, is one line."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists() or model.startswith((".", "/", "~")) or model.count("/") != 1:
        raise UserError(f"{flag} {model}: no model folder at {path}; give a sentence-transformers folder, a hub "
                        f"name (org/name) in the local Hugging Face cache, or {' or '.join(LIGHT)}")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id=model, local_files_only=not allow_download))
    except LocalEntryNotFoundError:
        return None
    except HFValidationError:
        raise UserError(f"{flag} {model}: not a hub name (org/name) nor a folder; give one of those, or "
                        f"{' or '.join(LIGHT)}") from None
    except (OSError, ValueError) as exc:  # the hub refused or was unreachable while downloading
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{flag} {model}: fetching it from the Hugging Face hub failed ({first}); check the name "
                        f"and the network, or download it by hand: huggingface-cli download {model}") from None


def load_model(model: str, folder: Path, flag: str = "--embedding") -> EmbeddingChoice:
    """A sentence-transformers model from a local folder, as dense.py loads a retriever's."""
    from sentence_transformers import SentenceTransformer

    from deskbench.search.embedded.dense import torch_device

    try:
        st = SentenceTransformer(str(folder), device=torch_device(), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError, RuntimeError, ImportError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{flag} {model}: the model at {folder} does not load as a sentence-transformers model "
                        f"({first[:300]}); give a sentence-transformers folder (modules.json), or "
                        f"{' or '.join(LIGHT)}") from None
    prompts: dict[str, str] = {role: next((str(st.prompts[n]) for n in names if st.prompts.get(n)), "")
               for role, names in _PROMPTS.items()}
    revision = folder.name if folder.parent.name == "snapshots" else None
    used = EmbeddingUsed(embedding=model, description=f"{model} (sentence-transformers, {folder})",
                         revision=revision, prompts=prompts)
    return EmbeddingChoice(used, model=st, _prompts=prompts)


def choose_embedding(requested: str | None = None, fallback: str = "tfidf", *, allow_download: bool = False,
                     paper_model: str = PAPER_MODEL) -> EmbeddingChoice:
    """The embedding of `--embedding requested`: a light method by name, a model (missing: one line,
    never a silent substitute), or, when None, the paper's model if it is here, else `fallback`
    with the reason recorded."""
    if requested in LIGHT:
        return _light(requested)
    if requested is not None:
        folder = local_model(requested, allow_download=allow_download)
        if folder is None:
            raise UserError(f"--embedding {requested}: not a folder, and not in the local Hugging Face cache; fetch "
                            f"it with `huggingface-cli download {requested}` (or add --embedding-download), or use "
                            f"{' or '.join(LIGHT)}")
        return load_model(requested, folder)
    folder = local_model(paper_model, allow_download=allow_download)
    if folder is None:
        why = (f"{fallback} (the paper's {paper_model} is not installed: fetch it with `huggingface-cli download "
               f"{paper_model}`, or add --embedding-download)")
        return _light(fallback, fallback=why)
    try:
        return load_model(paper_model, folder)
    except UserError as exc:
        return _light(fallback, fallback=f"{fallback} (the paper's {paper_model} is in {folder} but does not load: {exc})")
