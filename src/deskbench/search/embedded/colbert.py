"""`colbert=MODEL`: ColBERT late interaction over page texts (ColBERTv2, colbert-ir/colbertv2.0).

A ColBERT checkpoint is a BERT whose weights are saved under `bert.` beside `linear.weight` (hidden
-> dim, no bias), its tokenizer, and `artifact.metadata` (ColBERT's settings). Encoding follows the
official code (stanford-futuredata/ColBERT, colbert/modeling/colbert.py and tokenization/):

- a query is tokenized to query_maxlen - 1 tokens (padded), the query marker ([unused0]) put after
  [CLS], and every [PAD] replaced by [MASK] (query augmentation); the [MASK]s are not attended to
  (attend_to_mask_tokens off) but their output vectors are kept: 32 vectors per query;
- a document (here: a page) is tokenized to doc_maxlen - 1 tokens, the document marker ([unused1])
  put after [CLS]; the vectors of punctuation tokens (the first token of each ASCII punctuation
  symbol) and of padding are dropped;
- every vector is the BERT's last hidden state through `linear`, L2-normalised; a page's score is
  MaxSim: the sum over the query's vectors of the highest dot product with any of the page's.

The settings come from the checkpoint's artifact.metadata (colbertv2.0's: query_maxlen 32,
doc_maxlen 180, dim 128, cosine, punctuation masked), else ColBERT's own defaults. A page longer than
doc_maxlen tokens is truncated, as ColBERT truncates a passage. Every page's vectors are stored with
the corpus (store.py) and scored exhaustively (no PLAID compression: exact MaxSim).
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from deskbench.errors import UserError
from deskbench.search.embedded import store
from deskbench.search.embedded.dense import (
    model_folder,
    progress_line,
    refuse_unloaded,
    torch_device,
)
from deskbench.search.retriever import PageSource, Retriever, index_folder, model_fingerprint

if TYPE_CHECKING:
    import torch

    from deskbench.search.index import ScoredPage

BATCH = 8  # pages per forward pass while building an index


@dataclass(frozen=True)
class ColbertSettings:
    """ColBERT's settings that change the vectors (colbert/infra/config/settings.py's defaults)."""

    query_maxlen: int = 32
    doc_maxlen: int = 220  # colbertv2.0's artifact.metadata sets 180
    dim: int = 128
    mask_punctuation: bool = True
    attend_to_mask_tokens: bool = False
    query_token_id: str = "[unused0]"
    doc_token_id: str = "[unused1]"
    similarity: str = "cosine"
    interaction: str = "colbert"

    @classmethod
    def of(cls, folder: Path, spec: str) -> ColbertSettings:
        """The checkpoint's artifact.metadata over the defaults (as ColBERTConfig.load_from_checkpoint)."""
        path = folder / "artifact.metadata"
        if not path.is_file():
            return cls()
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
            settings = cls(**{f.name: type(getattr(cls(), f.name))(meta[f.name]) for f in fields(cls)
                              if meta.get(f.name) is not None})
        except (OSError, ValueError, TypeError) as exc:
            raise UserError(f"--retriever {spec}: {path} is unreadable ({exc}); it should be the JSON "
                            "ColBERT saves with a checkpoint") from None
        if settings.similarity != "cosine" or settings.interaction != "colbert":
            raise UserError(f"--retriever {spec}: the checkpoint's artifact.metadata asks for similarity "
                            f"{settings.similarity!r} and interaction {settings.interaction!r}; deskbench's "
                            "colbert scores cosine MaxSim only (ColBERTv2's): use a ColBERTv2 checkpoint")
        if settings.query_maxlen < 4 or settings.doc_maxlen < 4:
            raise UserError(f"--retriever {spec}: artifact.metadata's query_maxlen {settings.query_maxlen} or "
                            f"doc_maxlen {settings.doc_maxlen} is too small; each needs at least 4 tokens")
        return settings


def _linear_weight(folder: Path, spec: str) -> torch.Tensor:
    """`linear.weight` from the checkpoint's weights file (HF_ColBERT's projection)."""
    import torch

    safetensors = folder / "model.safetensors"
    binary = folder / "pytorch_model.bin"
    try:
        if safetensors.is_file():
            from safetensors import safe_open

            with safe_open(str(safetensors), framework="pt") as f:
                if "linear.weight" in f.keys():  # noqa: SIM118 (safe_open has keys(), no __contains__)
                    weight: torch.Tensor = f.get_tensor("linear.weight")
                    return weight
        elif binary.is_file():
            state = torch.load(binary, map_location="cpu", weights_only=True)
            if "linear.weight" in state:
                projection: torch.Tensor = state["linear.weight"]
                return projection
    except (OSError, RuntimeError, ValueError) as exc:
        raise UserError(f"--retriever {spec}: the weights in {folder} are unreadable ({exc}); download the "
                        "checkpoint again") from None
    raise UserError(f"--retriever {spec}: {folder} has no ColBERT projection (linear.weight in model.safetensors "
                    "or pytorch_model.bin); give a ColBERT checkpoint such as colbert-ir/colbertv2.0")


class ColbertEncoder:
    """A ColBERT checkpoint loaded with transformers: the BERT, the projection and the tokenizer."""

    def __init__(self, folder: Path, spec: str) -> None:
        import torch
        from transformers import AutoConfig, AutoTokenizer
        from transformers.models.auto.modeling_auto import MODEL_MAPPING

        self.settings = ColbertSettings.of(folder, spec)
        self.device = torch_device()
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            config = AutoConfig.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
            base: Any = MODEL_MAPPING[type(config)]
            base = base[0] if isinstance(base, tuple) else base
            # the encoder alone, as HF_ColBERT holds it; the projection is read below, not reported unexpected
            encoder: Any = type(f"ColBERT{base.__name__}", (base,), {"_keys_to_ignore_on_load_unexpected": [r"^linear\.", r"^cls\."]})
            self.bert: Any = encoder.from_pretrained(str(folder), config=config, local_files_only=True)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"--retriever {spec}: the checkpoint at {folder} does not load with transformers "
                            f"({first[:300]}); give a ColBERT checkpoint folder (config.json, weights, tokenizer)") from None
        refuse_unloaded(self.bert, spec, folder)
        weight = _linear_weight(folder, spec).to(torch.float32)
        hidden = int(self.bert.config.hidden_size)
        if weight.ndim != 2 or weight.shape[1] != hidden or weight.shape[0] != self.settings.dim:
            raise UserError(f"--retriever {spec}: linear.weight in {folder} is {tuple(weight.shape)}, not "
                            f"(dim {self.settings.dim}, hidden {hidden}); the checkpoint and its artifact.metadata "
                            "disagree")
        self.linear = torch.nn.Linear(hidden, self.settings.dim, bias=False)
        with torch.no_grad():
            self.linear.weight.copy_(weight)
        self.bert.to(self.device).eval()
        self.linear.to(self.device).eval()
        tok = self.tokenizer
        self.query_marker = self._token_id(self.settings.query_token_id, spec)
        self.doc_marker = self._token_id(self.settings.doc_token_id, spec)
        self.pad_id, self.mask_id = int(tok.pad_token_id), int(tok.mask_token_id)
        # colbert.py: the first token of each punctuation symbol, when mask_punctuation
        self.skiplist = ({tok.encode(s, add_special_tokens=False)[0] for s in string.punctuation}
                         if self.settings.mask_punctuation else set())

    def _token_id(self, token: str, spec: str) -> int:
        ident = self.tokenizer.convert_tokens_to_ids(token)
        if ident is None or ident == self.tokenizer.unk_token_id:
            raise UserError(f"--retriever {spec}: the checkpoint's tokenizer has no {token} (ColBERT's marker "
                            "token); give a ColBERT checkpoint whose vocabulary has it")
        return int(ident)

    # -- tokenization (colbert/modeling/tokenization/) ----------------------------------------

    def _with_marker(self, ids: torch.Tensor, marker: int) -> torch.Tensor:
        import torch

        column = torch.full((ids.size(0), 1), marker, dtype=ids.dtype)
        return torch.cat([ids[:, :1], column, ids[:, 1:]], dim=1)

    def query_tokens(self, queries: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Input ids and attention mask, (queries, query_maxlen): [CLS] [Q] ... [SEP] [MASK]*."""
        obj = self.tokenizer(list(queries), padding="max_length", truncation=True, return_tensors="pt",
                             max_length=self.settings.query_maxlen - 1)
        ids = self._with_marker(obj["input_ids"], self.query_marker)
        mask = self._with_marker(obj["attention_mask"], 1)
        ids[ids == self.pad_id] = self.mask_id
        if self.settings.attend_to_mask_tokens:
            mask[ids == self.mask_id] = 1
        return ids, mask

    def doc_tokens(self, docs: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Input ids and attention mask, (docs, longest <= doc_maxlen): [CLS] [D] ... [SEP] [PAD]*."""
        obj = self.tokenizer(list(docs), padding="longest", truncation="longest_first", return_tensors="pt",
                             max_length=self.settings.doc_maxlen - 1)
        return self._with_marker(obj["input_ids"], self.doc_marker), self._with_marker(obj["attention_mask"], 1)

    # -- vectors ------------------------------------------------------------------------------

    def _vectors(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        import torch

        with torch.inference_mode():
            hidden = self.bert(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))[0]
            return torch.nn.functional.normalize(self.linear(hidden).float(), p=2, dim=2).cpu()

    def encode_query(self, query: str) -> store.F32:
        """(query_maxlen, dim): every position's unit vector, the [MASK]s' included."""
        ids, mask = self.query_tokens([query])
        vectors = self._vectors(ids, mask)[0]
        keep = ids[0] != self.pad_id  # ColBERT.query's mask: nothing is [PAD] after the augmentation
        return np.asarray(vectors[keep].numpy(), dtype=np.float32)

    def encode_docs(self, docs: Sequence[str]) -> list[store.F32]:
        """(tokens kept, dim) per document: punctuation and padding dropped."""
        import torch

        ids, mask = self.doc_tokens(docs)
        vectors = self._vectors(ids, mask)
        skip = torch.tensor(sorted(self.skiplist | {self.pad_id}), dtype=ids.dtype)
        keep = ~torch.isin(ids, skip)
        return [np.asarray(vectors[i][keep[i]].numpy(), dtype=np.float32) for i in range(len(docs))]


class ColbertRetriever:
    """ColBERT MaxSim over every page's token vectors."""

    def __init__(self, corpus: PageSource, model: str, *, allow_download: bool = False) -> None:
        spec = f"colbert={model}"
        folder = model_folder("colbert", model, allow_download=allow_download)
        self.model_name = model
        self.encoder = ColbertEncoder(folder, spec)
        self.fingerprint = model_fingerprint(folder)
        options: dict[str, object] = {"settings": self.settings}
        keys = corpus.page_keys()

        def embed(batch: Sequence[store.Key]) -> list[store.F32]:
            return self.encoder.encode_docs(corpus.page_texts([(doc, page) for doc, page, _ in batch]))

        identity = {"kind": "colbert", "fingerprint": self.fingerprint, **options}
        self.vectors = store.build(index_folder(corpus, "colbert", self.fingerprint, options), keys, embed, identity,
                                   batch_size=BATCH, progress=progress_line(spec, len(keys)))

    @property
    def settings(self) -> dict[str, object]:
        return asdict(self.encoder.settings)

    def search(self, query: str, k: int) -> list[ScoredPage]:
        from deskbench.search.index import ScoredPage

        if k < 1 or not self.vectors.keys:
            return []
        hits = self.vectors.top_k_maxsim(self.encoder.encode_query(query), k)
        return [ScoredPage(self.vectors.keys[i][0], self.vectors.keys[i][1], score) for i, score in hits]

    def identity(self) -> dict[str, object]:
        return {"kind": "colbert", "model": self.model_name, "fingerprint": self.fingerprint,
                "scoring": "maxsim", **self.settings}


class _ColbertKind:
    name = "colbert"
    needs_model = True
    summary = ("ColBERTv2 late interaction over page texts (a vector per token, MaxSim), e.g. "
               "colbert=colbert-ir/colbertv2.0")

    def open(self, corpus: PageSource, model: str | None, *, allow_download: bool = False) -> Retriever:
        if model is None:
            raise UserError("--retriever colbert needs a model: give colbert=MODEL (a ColBERT checkpoint folder, "
                            "or a hub name already downloaded, e.g. colbert-ir/colbertv2.0)")
        return ColbertRetriever(corpus, model, allow_download=allow_download)


COLBERT = _ColbertKind()
