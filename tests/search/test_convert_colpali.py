"""colpali_engine checkpoints converted to transformers folders (search/embedded/convert.py).

Each test writes a tiny base and a LoRA adapter exactly as colpali_engine publishes them (the base's
keys as its ColQwen2_5 / ColPali classes saved them, `custom_text_proj`, an LM head the retrieval
model has no place for; the adapter's `base_model.model.<module>.lora_A/B.weight` keys and an
adapter_config.json with r, lora_alpha and colpali_engine's target_modules regex), converts them,
loads the result through late_visual's own loading code, and compares its vectors with a reference
computed here from the UNMERGED weights: the original model with every LoRA delta added at run time
by a forward hook, (x @ A^T @ B^T) * alpha / r. So the merge, the renaming and the config are all
checked; a page ranking is checked against MaxSim over the reference's vectors.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ingest, run_cli, write_text_pdf
from tiny_vision_encoders import (
    MAX_PIXELS,
    MIN_PIXELS,
    TEXT_HIDDEN,
    VISION_EMBED,
    _qwen_tokenizer,
    write_tiny_colpali,
)

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.search.embedded.convert import convert
from deskbench.search.embedded.late_visual import (
    COLPALI_FAMILY,
    COLQWEN2,
    LateOptions,
    LateVisualKind,
)
from deskbench.search.embedded.visual import PageRender

RENDER = PageRender(dpi=36, max_pixels=200_000)
R, ALPHA = 4, 8  # scale 2: a merge that forgot alpha / r would not pass
QWEN_TARGETS = r"(.*(model).*(down_proj|gate_proj|up_proj|k_proj|q_proj|v_proj|o_proj).*$|.*(custom_text_proj).*$)"
PALI_TARGETS = r"(.*(language_model).*(down_proj|gate_proj|up_proj|k_proj|q_proj|v_proj|o_proj).*$|.*(custom_text_proj).*$)"
QUERIES = ["harbour authority revenue", "tides"]

# transformers' names -> colpali_engine's, as the hub's checkpoints hold them (written out here, not
# taken from the converter, so the test checks its renaming)
QWEN_TO_ENGINE = ((r"^vlm\.language_model\.", "model."), (r"^vlm\.visual\.", "visual."),
                  (r"^embedding_proj_layer\.", "custom_text_proj."))
PALI_TO_ENGINE = ((r"^vlm\.language_model\.", "model.language_model.model."),
                  (r"^vlm\.vision_tower\.", "model.vision_tower.vision_model."),
                  (r"^vlm\.multi_modal_projector\.", "model.multi_modal_projector."),
                  (r"^embedding_proj_layer\.", "custom_text_proj."))


def _engine_name(table: tuple[tuple[str, str], ...], name: str) -> str:
    for pattern, repl in table:
        if re.match(pattern, name):
            return re.sub(pattern, repl, name, count=1)
    raise AssertionError(name)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("convert")
    write_text_pdf(root / "pdfs" / "a.pdf", ["Harbour authority revenue 2021 " * 20, "Minutes of the board"])
    write_text_pdf(root / "pdfs" / "b.pdf", ["A table of tides " * 30, "Staff list and phone numbers"])
    c, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    return c


def _tiny_colqwen25() -> tuple[Any, Any]:
    """A ColQwen2ForRetrieval over a 2-layer Qwen2.5-VL (what ColQwen2.5 is in transformers) and its processor."""
    from transformers import (
        ColQwen2Config,
        ColQwen2ForRetrieval,
        ColQwen2Processor,
        Qwen2_5_VLConfig,
        Qwen2VLImageProcessorPil,
    )

    tok = _qwen_tokenizer()
    head_dim = TEXT_HIDDEN // 2
    vlm = Qwen2_5_VLConfig(
        text_config={"vocab_size": len(tok), "hidden_size": TEXT_HIDDEN, "intermediate_size": 96,
                     "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                     "max_position_embeddings": 4096,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                         "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8]}},
        vision_config={"depth": 1, "hidden_size": VISION_EMBED, "out_hidden_size": TEXT_HIDDEN, "num_heads": 2,
                       "intermediate_size": 48, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                       "window_size": 56, "fullatt_block_indexes": [0]},
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"),
    )
    model = ColQwen2ForRetrieval(ColQwen2Config(vlm_config=vlm, embedding_dim=16)).eval()
    processor = ColQwen2Processor(image_processor=Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
                                  tokenizer=tok)
    return model, processor


def _tiny_colpali(tmp: Path) -> tuple[Any, Any]:
    from transformers import ColPaliForRetrieval, ColPaliProcessor

    folder = write_tiny_colpali(tmp / "colpali-made")
    return ColPaliForRetrieval.from_pretrained(folder).eval(), ColPaliProcessor.from_pretrained(folder)


def _write_engine_checkpoint(model: Any, processor: Any, table: tuple[tuple[str, str], ...], targets: str,
                             architecture: str, lm_head: str, tmp: Path, seed: int) -> tuple[Path, Path, dict[str, tuple[Any, Any]]]:
    """The base (sharded, with an LM head) and a LoRA adapter in colpali_engine's layout; returns the
    LoRA pairs by the transformers module name, for the reference."""
    import torch
    from safetensors.torch import save_file

    base, adapter = tmp / "base", tmp / "adapter"
    base.mkdir()
    adapter.mkdir()
    state = {_engine_name(table, k): v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    embed = next(k for k in state if k.endswith("embed_tokens.weight"))
    state[lm_head] = state[embed].clone()  # tied, but the hub's bases hold it
    keys = sorted(state)
    save_file({k: state[k] for k in keys[: len(keys) // 2]}, str(base / "model-00001-of-00002.safetensors"))
    save_file({k: state[k] for k in keys[len(keys) // 2:]}, str(base / "model-00002-of-00002.safetensors"))
    vlm = model.config.vlm_config.to_dict()
    vlm["architectures"] = [architecture]
    (base / "config.json").write_text(json.dumps(vlm))
    processor.save_pretrained(base)

    generator = torch.Generator().manual_seed(seed)
    lora: dict[str, tuple[Any, Any]] = {}
    tensors = {}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        engine = _engine_name(table, f"{name}.weight").removesuffix(".weight")
        if re.fullmatch(targets, engine):
            a = torch.randn(R, module.in_features, generator=generator) * 0.2
            b = torch.randn(module.out_features, R, generator=generator) * 0.2
            tensors[f"base_model.model.{engine}.lora_A.weight"] = a
            tensors[f"base_model.model.{engine}.lora_B.weight"] = b
            lora[name] = (a, b)
    assert any("proj" in n and "embedding" not in n for n in lora) and "embedding_proj_layer" in lora
    save_file(tensors, str(adapter / "adapter_model.safetensors"))
    (adapter / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "FEATURE_EXTRACTION", "r": R, "lora_alpha": ALPHA, "lora_dropout": 0.1,
        "target_modules": targets, "modules_to_save": None, "use_rslora": False, "use_dora": False,
        "fan_in_fan_out": False, "rank_pattern": {}, "alpha_pattern": {}, "init_lora_weights": "gaussian",
        "base_model_name_or_path": str(base)}))
    processor.save_pretrained(adapter)  # colpali_engine saves the processor with the adapter
    return base, adapter, lora


def _with_lora_hooks(model: Any, lora: dict[str, tuple[Any, Any]]) -> list[Any]:
    """The unmerged adapter: each target's output plus (x A^T B^T) * alpha / r, at run time."""
    modules = dict(model.named_modules())

    def hook(a: Any, b: Any) -> Any:
        return lambda _m, inputs, output: output + (inputs[0] @ a.T @ b.T) * (ALPHA / R)

    return [modules[name].register_forward_hook(hook(a, b)) for name, (a, b) in lora.items()]


def _page_images(corpus: Corpus) -> list[Any]:
    from PIL import Image

    return [Image.open(io.BytesIO(corpus.page_image(d, p, RENDER.spec()))).convert("RGB")
            for d, p, _ in corpus.page_keys()]


def _check_against_reference(corpus: Corpus, family: Any, out: Path, model: Any, processor: Any,
                             lora: dict[str, tuple[Any, Any]]) -> None:
    import torch

    retriever = LateVisualKind(family, "test", LateOptions(render=RENDER, batch_size=2)).open(corpus, str(out))
    handles = _with_lora_hooks(model, lora)
    try:
        with torch.no_grad():
            pages = [model(**processor.process_images(images=[img])).embeddings[0] for img in _page_images(corpus)]
            plain = [retriever.embed_images([img])[0] for img in _page_images(corpus)]
            for ref, got in zip(pages, plain, strict=True):
                assert np.allclose(got, ref.numpy(), atol=1e-4)
            keys = corpus.page_keys()
            for query in QUERIES:
                q = model(**processor.process_queries(text=[query])).embeddings[0]
                assert np.allclose(retriever.encode_query(query).vectors, q.numpy(), atol=1e-4)
                scores = np.array([float((q @ p.T).max(dim=1).values.sum()) for p in pages])
                expected = [keys[i][:2] for i in np.argsort(-scores, kind="stable")]
                assert [(h.document, h.page) for h in retriever.search(query, k=len(keys))] == expected
        for handle in handles:
            handle.remove()
        with torch.no_grad():  # the adapter changed the vectors: without it they differ
            base_only = model(**processor.process_queries(text=[QUERIES[0]])).embeddings[0].numpy()
        assert not np.allclose(retriever.encode_query(QUERIES[0]).vectors, base_only, atol=1e-3)
    finally:
        for handle in handles:
            handle.remove()


def test_colqwen25_adapter_is_merged_and_loads_as_colqwen(corpus: Corpus, tmp_path: Path) -> None:
    import torch

    torch.manual_seed(0)
    model, processor = _tiny_colqwen25()
    base, adapter, lora = _write_engine_checkpoint(model, processor, QWEN_TO_ENGINE, QWEN_TARGETS, "ColQwen2_5",
                                                   "lm_head.weight", tmp_path, seed=1)
    done = convert(str(adapter), tmp_path / "out")  # the base named by adapter_config.json
    assert (done.kind, done.embedding_dim, done.lora_modules) == ("colqwen", 16, len(lora))
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model_type"] == "colqwen2" and config["vlm_config"]["model_type"] == "qwen2_5_vl"
    _check_against_reference(corpus, COLQWEN2, tmp_path / "out", model, processor, lora)


def test_colpali_adapter_is_merged_and_loads_as_colpali(corpus: Corpus, tmp_path: Path) -> None:
    model, processor = _tiny_colpali(tmp_path)
    base, adapter, lora = _write_engine_checkpoint(model, processor, PALI_TO_ENGINE, PALI_TARGETS, "ColPali",
                                                   "model.language_model.lm_head.weight", tmp_path, seed=2)
    assert not any("vision" in name for name in lora)  # colpali_engine tunes the language model and projection
    done = convert(str(adapter), tmp_path / "out", base=str(base))
    assert (done.kind, done.embedding_dim) == ("colpali", 16)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == "colpali"
    _check_against_reference(corpus, COLPALI_FAMILY, tmp_path / "out", model, processor, lora)


def test_errors_are_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError, match="is not an adapter") as err:
        convert(str(tmp_path / "plain"), tmp_path / "out")
    assert "\n" not in str(err.value)

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 2,
                                                             "base_model_name_or_path": "vidore/no-such-base-h11"}))
    with pytest.raises(UserError, match=r"base model 'vidore/no-such-base-h11' is missing.*huggingface-cli download"):
        convert(str(adapter), tmp_path / "out")
    with pytest.raises(UserError, match="base model .* is not a folder"):
        convert(str(adapter), tmp_path / "out", base=str(tmp_path / "nowhere" / "base"))

    other = tmp_path / "bert"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(UserError, match="unknown architecture: .* 'bert'"):
        convert(str(adapter), tmp_path / "out", base=str(other))

    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "IA3"}))
    with pytest.raises(UserError, match="not LoRA"):
        convert(str(adapter), tmp_path / "out", base=str(other))


def test_convert_command(corpus: Corpus, tmp_path: Path) -> None:
    model, processor = _tiny_colqwen25()
    base, adapter, _ = _write_engine_checkpoint(model, processor, QWEN_TO_ENGINE, QWEN_TARGETS, "ColQwen2_5",
                                                "lm_head.weight", tmp_path, seed=3)
    result = run_cli("convert", str(adapter), "--base", str(base), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert f"--retriever colqwen={tmp_path / 'out'}" in result.stdout.replace("\n", "")
    assert "merging" in result.stderr
    again = run_cli("convert", str(adapter), "--out", str(tmp_path / "out"))
    assert again.returncode == 2 and "not empty" in again.stderr and "Traceback" not in again.stderr


def _into_hub_cache(cache: Path, repo: str, folder: Path) -> None:
    """`folder` as the local Hugging Face cache holds a snapshot of `repo` (refs/main -> snapshots/REV)."""
    import shutil

    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text("0" * 40)
    shutil.copytree(folder, root / "snapshots" / ("0" * 40))


def test_an_adapter_given_to_the_retriever_by_hub_name_is_converted_once(
        corpus: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """MDocAgent's vidore/colpali as --image-retriever names it: the adapter and its base in the local
    HF cache, merged on first use into deskbench's cache, then read from there."""
    from huggingface_hub import constants

    from deskbench.search.retriever import open_retriever

    model, processor = _tiny_colpali(tmp_path)
    base, adapter, lora = _write_engine_checkpoint(model, processor, PALI_TO_ENGINE, PALI_TARGETS, "ColPali",
                                                   "model.language_model.lm_head.weight", tmp_path, seed=4)
    config = json.loads((adapter / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "vidore/colpaligemma-3b-mix-448-base"
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    hub = tmp_path / "hub"
    _into_hub_cache(hub, "vidore/colpali", adapter)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with pytest.raises(UserError, match=r"colpali=vidore/colpali is a colpali_engine adapter.*"
                                        r"'vidore/colpaligemma-3b-mix-448-base' is missing.*--retriever-download") as err:
        open_retriever("colpali=vidore/colpali", corpus)
    assert "\n" not in str(err.value)
    _into_hub_cache(hub, "vidore/colpaligemma-3b-mix-448-base", base)

    first = open_retriever("colpali=vidore/colpali", corpus)
    assert "merging" in capsys.readouterr().err
    (done,) = (tmp_path / "xdg" / "deskbench" / "converted").iterdir()
    assert done.name.startswith("vidore--colpali-") and (done / "config.json").is_file()
    assert first.identity()["model"] == "vidore/colpali"
    again = open_retriever("colpali=vidore/colpali", corpus)
    assert "merging" not in capsys.readouterr().err  # converted once
    assert again.identity()["fingerprint"] == first.identity()["fingerprint"]
    _check_against_reference(corpus, COLPALI_FAMILY, done, model, processor, lora)
