"""A tiny model2vec static-embedding model built offline: a WordLevel tokenizer (whitespace and
punctuation split, case kept, [UNK] for the rest) over the words given, seeded random vectors,
saved in the layout model2vec writes (config.json, tokenizer.json, model.safetensors with an
`embeddings` tensor), so semtools' `search` loads it through its real loader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

WORD = re.compile(r"\w+|[^\w\s]+")  # what the Whitespace pre-tokenizer splits on


def words_of(*texts: str) -> list[str]:
    """The tokens the tokenizer will see in these texts, first occurrence order."""
    return list(dict.fromkeys(w for t in texts for w in WORD.findall(t)))


def build_static_model(folder: Path, words: list[str], dims: int = 16, seed: int = 7,
                       normalize: bool = True) -> np.ndarray:
    """Write the model to `folder`; returns its embedding table (row i = token id i; [UNK] is 0)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(words))}}
    tokenizer = Tokenizer(WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()  # type: ignore[assignment]
    tokenizer.save(str(folder / "tokenizer.json"))
    table = np.random.default_rng(seed).standard_normal((len(vocab), dims)).astype(np.float32)
    save_file({"embeddings": table}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "normalize": normalize,
                                                    "hidden_dim": dims, "tokenizer_name": "tiny-wordlevel"}))
    return table


def vocab_of(folder: Path) -> dict[str, int]:
    return dict(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
