"""Tiny text encoders with random weights, built offline with the real classes and saved as the
real models are laid out, so the retrievers load them through their own loading code:

- a sentence-transformers folder (modules.json, the BERT at its root, 1_Pooling, 2_Normalize,
  optionally its query/document prompts in config_sentence_transformers.json);
- a ColBERT checkpoint as colbert-ir/colbertv2.0 is laid out: a BERT whose weights are saved under
  `bert.` beside `linear.weight` (hidden -> dim, no bias), the tokenizer, and artifact.metadata.

The vocabulary is a small WordPiece one (BERT's special tokens, [unused0] and [unused1] as ColBERT's
markers, ASCII punctuation, a few words); any other word is [UNK].

torch, transformers and sentence_transformers are imported inside the builders, never at module
level: every xdist worker collects every test file (tests/conftest.py refuses a collection that
imports them).
"""

from __future__ import annotations

import json
import string
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import BertConfig, BertTokenizer

HIDDEN = 32
SPECIAL = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("document the a of and in is was for to annual report harbour mountain car cars permit building "
         "river bridge budget council tax library school museum train station weather forecast rain snow "
         "page one two three four five six seven eight nine ten what who when where which how much")
SUBWORDS = ["##s", "##ed", "##ing"]


def vocabulary() -> dict[str, int]:
    tokens = [*SPECIAL, *string.punctuation, *WORDS.split(), *SUBWORDS]
    return {token: i for i, token in enumerate(dict.fromkeys(tokens))}


def tokenizer() -> BertTokenizer:
    """A WordPiece tokenizer (transformers' BertTokenizer, backed by `tokenizers`) over the small vocab."""
    from transformers import BertTokenizer

    return BertTokenizer(vocab=vocabulary(), do_lower_case=True)


def bert_config(max_positions: int = 512) -> BertConfig:
    from transformers import BertConfig

    return BertConfig(vocab_size=len(vocabulary()), hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=max_positions, pad_token_id=0)


def write_sentence_transformer(folder: Path, *, seed: int = 0, prompts: dict[str, str] | None = None,
                               max_seq_length: int = 128) -> Path:
    """A 2-layer BERT with mean pooling and normalisation, saved as a sentence-transformers model."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertModel

    torch.manual_seed(seed)
    base = folder.with_name(folder.name + "-bert")
    BertModel(bert_config()).save_pretrained(base)
    tokenizer().save_pretrained(base)
    encoder = Transformer(str(base), max_seq_length=max_seq_length)
    model = SentenceTransformer(modules=[encoder, Pooling(HIDDEN, "mean"), Normalize()], prompts=prompts,
                                device="cpu")
    model.save(str(folder), create_model_card=False)
    return folder


@cache
def tiny_colbert() -> Any:  # -> type[BertPreTrainedModel]
    """The class TinyColBERT, ColBERT's HF_ColBERT layout (colbert/modeling/hf_colbert.py): `bert`
    and `linear`. Made on first call (one class for the session) so that importing this module
    imports no transformers."""
    from torch import nn
    from transformers import BertModel, BertPreTrainedModel

    class TinyColBERT(BertPreTrainedModel):  # type: ignore[misc]
        def __init__(self, config: BertConfig, dim: int) -> None:
            super().__init__(config)
            self.bert = BertModel(config)
            self.linear = nn.Linear(config.hidden_size, dim, bias=False)
            self.post_init()

    return TinyColBERT


def write_colbert(folder: Path, *, seed: int = 0, dim: int = 16, query_maxlen: int = 32,
                  doc_maxlen: int = 180, metadata: bool = True) -> Path:
    """A ColBERT checkpoint folder like colbert-ir/colbertv2.0's (config.json, model.safetensors with
    `bert.*` and `linear.weight`, the tokenizer files, artifact.metadata with ColBERT's settings)."""
    import torch

    torch.manual_seed(seed)
    model = tiny_colbert()(bert_config(), dim)
    model.config.architectures = ["HF_ColBERT"]
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    if metadata:
        (folder / "artifact.metadata").write_text(json.dumps({
            "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_token": "[Q]", "doc_token": "[D]",
            "dim": dim, "doc_maxlen": doc_maxlen, "query_maxlen": query_maxlen, "mask_punctuation": True,
            "attend_to_mask_tokens": False, "similarity": "cosine", "interaction": "colbert",
        }, indent=1), encoding="utf-8")
    return folder
