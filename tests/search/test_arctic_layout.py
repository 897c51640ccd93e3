"""The paper's text embedding, `Snowflake/snowflake-arctic-embed-m-v2.0` (MADQA H.1/H.6, and a natural
`dense=` model), read by deskbench's own loading code without the model's code from the hub.

The checkpoint is published with `model_type: gte` and an `auto_map` to code of its own (Alibaba's
"new-impl" GTE, copied into the repository as configuration_hf_alibaba_nlp_gte.py and
modeling_hf_alibaba_nlp_gte.py), and its weights carry new-impl's names (packed `qkv_proj`, packed
`up_gate_proj`, `attn_ln` / `mlp_ln`). transformers 5 has a native GteModel that reads that layout
(its "gte" checkpoint conversion splits qkv_proj into q/k/v and up_gate_proj into up/gate, and renames
the norms), so `trust_remote_code` stays off. The tests build a tiny checkpoint in exactly the
published layout (random weights, 2 layers), load it through dense.py and embedding_choice.py, and
compare the embeddings with a forward pass written here from new-impl's definition (RoPE with
theta 160000, post-norm layers, GeGLU as gelu(gate) * up, CLS pooling, normalised), so a weight that
was not read, or read into the wrong place, shows as a different vector.

Published facts used (huggingface.co/Snowflake/snowflake-arctic-embed-m-v2.0, main, after the
"remove dependencies on remote (#2)" and "Integrate with Sentence Transformers (#3)" commits):
config.json's keys as below; modules.json Transformer -> 1_Pooling (CLS) -> Normalize;
config_sentence_transformers.json's prompts {"query": "query: "} and no document prompt (the card:
the prefix on the query only); an XLM-R tokenizer (tokenizer.json, `<s>`=0, `<pad>`=1, `</s>`=2).
"""

from __future__ import annotations

import json
import math
import shutil
import string
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from conftest import ingest, write_text_pdf
from huggingface_hub import constants
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from deskbench.search import retriever as retrievers
from deskbench.search.embedded import dense
from deskbench.search.embedded.dense import DenseRetriever
from deskbench.tracks.docqa.analysis import embedding_choice
from deskbench.tracks.docqa.analysis.embedding_choice import PAPER_MODEL

if TYPE_CHECKING:  # torch is imported where used: every xdist worker collects this file (tests/conftest.py)
    import torch

HIDDEN, INTERMEDIATE, LAYERS, HEADS = 32, 48, 2, 2
WORDS = ["the", "a", "of", "and", "in", "annual", "report", "harbour", "mountain", "car", "river", "bridge", "council",
         "budget", "library", "school", "weather", "forecast", "rain", "snow", "museum", "train", "station", "what"]
REMOTE_FILES = ("configuration_hf_alibaba_nlp_gte.py", "modeling_hf_alibaba_nlp_gte.py")
LOCAL_AUTO_MAP = {"AutoConfig": "configuration_hf_alibaba_nlp_gte.GteConfig",
                  "AutoModel": "modeling_hf_alibaba_nlp_gte.GteModel"}
HUB_AUTO_MAP = {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",  # the form before "#2"
                "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel"}


def published_config(vocab_size: int, auto_map: dict[str, str]) -> dict[str, object]:
    """config.json as published, every key kept (the sizes shrunk)."""
    return {"architectures": ["GteModel"], "attention_probs_dropout_prob": 0.0, "auto_map": auto_map,
            "classifier_dropout": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": HIDDEN,
            "initializer_range": 0.02, "intermediate_size": INTERMEDIATE, "layer_norm_eps": 1e-12,
            "layer_norm_type": "layer_norm", "logn_attention_clip1": False, "logn_attention_scale": False,
            "max_position_embeddings": 8192, "model_type": "gte", "num_attention_heads": HEADS,
            "num_hidden_layers": LAYERS, "pack_qkv": True, "pad_token_id": 1, "position_embedding_type": "rope",
            "rope_scaling": None, "rope_theta": 160000, "torch_dtype": "float32", "transformers_version": "4.39.3",
            "type_vocab_size": 1, "unpad_inputs": "true", "use_memory_efficient_attention": "true",
            "vocab_size": vocab_size}


def write_tokenizer(folder: Path) -> int:
    """An XLM-R Unigram tokenizer, its vocabulary size. The pipeline is the one transformers 5's
    XLMRobertaTokenizer rebuilds from any tokenizer.json (whitespace split, then SentencePiece's
    metaspace; the real file's precompiled charsmap, which this tiny one has none of, is kept)."""
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [("\u2581" + w, -2.0 - i / 100) for i, w in enumerate(WORDS)]
    pieces += [(c, -6.0) for c in string.ascii_letters + ":.,?"] + [("\u2581", -4.0), ("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok.save(str(folder / "tokenizer.json"))
    special = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
               "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=2))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {**special, "clean_up_tokenization_spaces": True, "model_max_length": 8192,
         "tokenizer_class": "XLMRobertaTokenizer"}, indent=2))
    return int(tok.get_vocab_size())


def new_impl_weights(vocab_size: int, seed: int) -> dict[str, torch.Tensor]:
    """Random weights under the names new-impl's GteModel saves (no pooler: AutoModel's default)."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 0.5) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    def norm(prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": 1 + rand(HIDDEN, scale=0.1), f"{prefix}.bias": rand(HIDDEN, scale=0.1)}

    sd = {"embeddings.word_embeddings.weight": rand(vocab_size, HIDDEN),
          "embeddings.token_type_embeddings.weight": rand(1, HIDDEN), **norm("embeddings.LayerNorm")}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        sd |= {p + "attention.qkv_proj.weight": rand(3 * HIDDEN, HIDDEN), p + "attention.qkv_proj.bias": rand(3 * HIDDEN, scale=0.1),
               p + "attention.o_proj.weight": rand(HIDDEN, HIDDEN), p + "attention.o_proj.bias": rand(HIDDEN, scale=0.1),
               p + "mlp.up_gate_proj.weight": rand(2 * INTERMEDIATE, HIDDEN),
               p + "mlp.down_proj.weight": rand(HIDDEN, INTERMEDIATE), p + "mlp.down_proj.bias": rand(HIDDEN, scale=0.1),
               **norm(p + "attn_ln"), **norm(p + "mlp_ln")}
    return sd


def write_arctic_layout(folder: Path, *, seed: int = 0, auto_map: dict[str, str] = LOCAL_AUTO_MAP) -> Path:
    """A tiny checkpoint laid out as snowflake-arctic-embed-m-v2.0 is. Its own code files are there
    by name but raise when imported: loading must never run them."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    vocab_size = write_tokenizer(folder)
    (folder / "config.json").write_text(json.dumps(published_config(vocab_size, auto_map), indent=2))
    if auto_map is LOCAL_AUTO_MAP:
        for name in REMOTE_FILES:
            (folder / name).write_text('raise RuntimeError("the model\'s own code was run")\n')
    save_file({k: v.contiguous() for k, v in new_impl_weights(vocab_size, seed).items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], indent=2))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
         "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
         "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True}, indent=2))
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"__version__": {"sentence_transformers": "3.3.1", "transformers": "4.46.3", "pytorch": "2.5.1"},
         "prompts": {"query": "query: "}, "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2))
    return folder


def reference(folder: Path, texts: list[str]) -> np.ndarray:
    """new-impl's forward, one text at a time (no padding), from the checkpoint's own tensors and
    tokenizer.json: CLS of the last layer, L2-normalised."""
    import torch
    from safetensors.torch import load_file

    cfg = json.loads((folder / "config.json").read_text())
    sd = load_file(str(folder / "model.safetensors"))
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    hidden, heads, inter = int(cfg["hidden_size"]), int(cfg["num_attention_heads"]), int(cfg["intermediate_size"])
    hd = hidden // heads

    def ln(x: torch.Tensor, p: str) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (hidden,), sd[p + ".weight"], sd[p + ".bias"], cfg["layer_norm_eps"])

    def linear(x: torch.Tensor, p: str) -> torch.Tensor:
        bias = sd.get(p + ".bias")  # new-impl's up_gate_proj has none
        return x @ sd[p + ".weight"].T + (0 if bias is None else bias)

    def rotate_half(z: torch.Tensor) -> torch.Tensor:
        return torch.cat([-z[..., hd // 2:], z[..., :hd // 2]], dim=-1)

    rows = []
    for text in texts:
        ids = torch.tensor(tok.encode(text).ids)
        n = len(ids)
        x = ln(sd["embeddings.word_embeddings.weight"][ids] + sd["embeddings.token_type_embeddings.weight"][0],
               "embeddings.LayerNorm")
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        freqs = torch.arange(n, dtype=torch.float32)[:, None] * inv_freq[None, :]
        angles = torch.cat([freqs, freqs], dim=-1)[:, None, :]  # [n, 1, hd]: the same for every head
        cos, sin = angles.cos(), angles.sin()
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv = linear(x, p + "attention.qkv_proj")  # packed: q, k, v one after the other
            q, k, v = (qkv[:, j * hidden:(j + 1) * hidden].reshape(n, heads, hd) for j in range(3))
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            attn = torch.softmax(torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd), dim=-1)
            context = torch.einsum("hqk,khd->qhd", attn, v).reshape(n, hidden)
            x = ln(x + linear(context, p + "attention.o_proj"), p + "attn_ln")
            up_gate = linear(x, p + "mlp.up_gate_proj")  # packed: up first, then gate
            up, gate = up_gate[:, :inter], up_gate[:, inter:]
            x = ln(x + linear(torch.nn.functional.gelu(gate) * up, p + "mlp.down_proj"), p + "mlp_ln")
        rows.append(torch.nn.functional.normalize(x[0], dim=-1))
    return torch.stack(rows).double().numpy()


TEXTS = ["the annual report of the harbour", "rain", "what car crossed the river bridge in the snow?",
         "the council budget for the library and the school and the museum"]


@pytest.fixture(scope="module")
def arctic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_arctic_layout(tmp_path_factory.mktemp("arctic") / "snowflake-arctic-embed-m-v2.0", seed=7)


@pytest.fixture
def empty_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hugging Face cache holding nothing, offline."""
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def assert_own_code_never_ran() -> None:
    assert not [m for m in sys.modules if "alibaba_nlp_gte" in m or "new-impl" in m or "new_impl" in m]


def test_dense_loads_the_published_layout_through_transformers_gte(arctic: Path, tmp_path: Path) -> None:
    from transformers.models.gte.modeling_gte import GteModel

    model = dense._load(f"dense={arctic}", arctic)
    assert_own_code_never_ran()
    backbone = model[0].auto_model
    assert type(backbone) is GteModel  # transformers' own class, not the checkpoint's
    rope = backbone.config.rope_parameters
    assert isinstance(rope, dict) and rope["rope_theta"] == 160000  # the published rope_theta, read
    assert model[1].get_config_dict()["pooling_mode"] == "cls"
    # every published tensor was read, split and renamed: the embeddings are new-impl's, to float error
    got = model.encode(TEXTS, prompt="", batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    want = reference(arctic, TEXTS)
    assert np.abs(np.asarray(got, dtype=np.float64) - want).max() < 1e-5  # padded batch == one by one
    # and a different checkpoint gives other vectors, so the comparison can fail
    assert np.abs(reference(arctic, TEXTS) - reference(write_arctic_layout(tmp_path / "other", seed=8), TEXTS)).max() > 0.05


def test_the_hub_form_of_auto_map_loads_offline_too(tmp_path: Path, empty_hub: Path) -> None:
    folder = write_arctic_layout(tmp_path / "arctic-hub-automap", seed=3, auto_map=HUB_AUTO_MAP)
    model = dense._load(f"dense={folder}", folder)
    assert_own_code_never_ran()
    got = model.encode(TEXTS[:2], prompt="", normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(np.asarray(got, dtype=np.float64) - reference(folder, TEXTS[:2])).max() < 1e-5


def test_the_dense_retriever_uses_the_query_prompt_only(arctic: Path, tmp_path: Path) -> None:
    docs = {"alpha.pdf": ["The annual report of the harbour.", "The mountain car and the river bridge."],
            "beta.pdf": ["The council budget for the library.", "Weather forecast: rain and snow."]}
    for name, texts in docs.items():
        write_text_pdf(tmp_path / "pdfs" / name, texts)
    corpus, _ = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    r = retrievers.open_retriever(f"dense={arctic}", corpus)
    assert isinstance(r, DenseRetriever)
    identity = r.identity()
    assert identity["prompts"] == {"query": "query: ", "document": ""}  # the card: the prefix on the query only
    assert identity["dims"] == HIDDEN and identity["max_seq_length"] == 8192
    keys = [(d, p) for d, p, _ in corpus.page_keys()]
    pages = reference(arctic, corpus.page_texts(keys))
    for query in ("the harbour report", "snow and rain"):
        scores = pages @ reference(arctic, ["query: " + query])[0]
        order = np.argsort(-scores, kind="stable")
        hits = r.search(query, 4)
        assert [(h.document, h.page) for h in hits] == [keys[i] for i in order]
        assert [h.score for h in hits] == pytest.approx([float(scores[i]) for i in order], abs=1e-5)


def test_the_analyses_take_it_as_the_papers_model_from_the_cache(arctic: Path, empty_hub: Path) -> None:
    # the layout huggingface_hub writes for the paper's name: found there, nothing fetched, no fallback
    repo = empty_hub / ("models--" + PAPER_MODEL.replace("/", "--"))
    snapshot = repo / "snapshots" / "95c2741480856aa9666782eb4afe11959938017f"
    snapshot.parent.mkdir(parents=True)
    shutil.copytree(arctic, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    choice = embedding_choice.choose_embedding()
    assert_own_code_never_ran()
    assert choice.used.embedding == PAPER_MODEL and choice.used.fallback is None
    assert choice.used.prompts == {"query": "query: ", "document": ""}
    assert choice.used.revision == snapshot.name
    query, document = choice.embedder("query"), choice.embedder("document")
    assert query is not None and document is not None
    assert np.abs(query(TEXTS) - reference(arctic, ["query: " + t for t in TEXTS])).max() < 1e-5
    assert np.abs(document(TEXTS) - reference(arctic, TEXTS)).max() < 1e-5
