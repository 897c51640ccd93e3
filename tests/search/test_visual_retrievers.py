"""Visual retrievers (`dse=MODEL`, `colqwen=MODEL`) on tiny random models built offline.

The expected rankings are computed in the test from the model itself, the way the reference code
runs it: DSE as MADQA's HEAVEN baseline does (baselines/heaven/encoders.py DSEEncoder: one input
at a time, Qwen2VLForConditionalGeneration's last hidden state of the last token, normalised),
ColQwen2 with transformers' own MaxSim (ColQwen2Processor.score_retrieval over pages embedded one
at a time). The retrievers batch pages with padding, so an agreement is not a tautology.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ingest, write_text_pdf
from tiny_vision_encoders import (
    MAX_PIXELS,
    MIN_PIXELS,
    write_tiny_colpali,
    write_tiny_colqwen2,
    write_tiny_dse,
)

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.search.embedded.late_visual import (
    COLPALI,
    COLPALI_FAMILY,
    COLQWEN,
    COLQWEN2,
    Family,
    LateOptions,
    LateVisualKind,
)
from deskbench.search.embedded.visual import (
    DOC_PROMPT,
    DSE,
    QUERY_PROMPT,
    DseKind,
    DseOptions,
    PageRender,
    smart_resize,
)
from deskbench.search.retriever import kind, open_retriever

RENDER = PageRender(dpi=36, max_pixels=200_000)  # small pages: the tiny models run them quickly
TINY_DSE = DseOptions(render=RENDER, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, batch_size=3)
QUERIES = ["quarterly revenue of the harbour authority", "x"]


def _write_sized_pdf(path: Path, pages: list[tuple[str, tuple[float, float]]]) -> None:
    """Pages of different sizes (points), so their images have different token counts and a batch
    of them is padded."""
    from reportlab.pdfgen import canvas

    path.parent.mkdir(parents=True, exist_ok=True)
    c = canvas.Canvas(str(path), invariant=1)
    for text, size in pages:
        c.setPageSize(size)
        for n, line in enumerate(text.splitlines()):
            c.drawString(36, size[1] - 48 - 14 * n, line)
        c.showPage()
    c.save()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("visual")
    write_text_pdf(root / "pdfs" / "a.pdf", ["Harbour authority revenue 2021 " * 20, "Minutes of the board"])
    _write_sized_pdf(root / "pdfs" / "b.pdf", [("A table of tides\n" * 30, (792, 612)), ("Fish", (300, 300)),
                                               ("Staff list\nand phone numbers", (420, 595))])
    c, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    return c


@pytest.fixture(scope="module")
def dse_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_dse(tmp_path_factory.mktemp("models") / "dse")


@pytest.fixture(scope="module")
def colqwen_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_colqwen2(tmp_path_factory.mktemp("models") / "colqwen")


@pytest.fixture(scope="module")
def colpali_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_colpali(tmp_path_factory.mktemp("models") / "colpali")


def _page_images(corpus: Corpus) -> list:  # list[PIL.Image]
    from PIL import Image

    return [Image.open(io.BytesIO(corpus.page_image(d, p, RENDER.spec()))).convert("RGB")
            for d, p, _ in corpus.page_keys()]


# -- DSE -----------------------------------------------------------------------------------


def _heaven_dse(folder: Path, prompt: str, image) -> np.ndarray:  # noqa: ANN001
    """One input as HEAVEN's DSEEncoder embeds it: the conditional-generation model, no padding,
    hidden_states[-1][:, -1], normalised."""
    import torch
    from transformers import AutoImageProcessor, AutoTokenizer, Qwen2VLForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(folder)
    proc = AutoImageProcessor.from_pretrained(folder)
    model = Qwen2VLForConditionalGeneration.from_pretrained(folder).eval()
    pix = proc(images=[image], return_tensors="pt")
    n = int(pix["image_grid_thw"][0].prod()) // proc.merge_size ** 2
    ids = tok(prompt.replace("<|image_pad|>", "<|image_pad|>" * n), return_tensors="pt")
    with torch.no_grad():
        out = model(**ids, **pix, mm_token_type_ids=(ids["input_ids"] == model.config.image_token_id).long(),
                    output_hidden_states=True)
    v = out.hidden_states[-1][0, -1].numpy()
    return v / np.linalg.norm(v)


def test_dse_ranks_pages_as_heavens_recipe(corpus: Corpus, dse_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    retriever = DseKind(TINY_DSE).open(corpus, str(dse_model))
    assert "embedded 5/5 new pages" in capsys.readouterr().err
    keys = corpus.page_keys()
    pages = [_heaven_dse(dse_model, DOC_PROMPT, retriever.page_image(img)) for img in _page_images(corpus)]
    # the stored rows are each page's own vector, in the corpus's page order
    assert np.allclose(retriever.vectors.vectors, np.stack(pages), atol=1e-4)
    for query in QUERIES:
        q = _heaven_dse(dse_model, QUERY_PROMPT.format(query=query), retriever.query_image())
        assert np.allclose(retriever.encode_query(query), q, atol=1e-4)
        scores = np.stack(pages) @ q
        expected = [keys[i][:2] for i in np.argsort(-scores, kind="stable")]
        got = retriever.search(query, k=5)
        assert [(h.document, h.page) for h in got] == expected
        assert [h.score for h in got] == pytest.approx(sorted(scores, reverse=True), abs=1e-4)
    # a page's own image as the query finds that page first (cosine 1)
    for i, row in enumerate(retriever.vectors.vectors):
        (top, score), = retriever.vectors.top_k_dot(row, 1)
        assert top == i and score == pytest.approx(1.0, abs=1e-5)


def test_dse_index_is_built_once_and_recorded(corpus: Corpus, dse_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = DseKind(TINY_DSE).open(corpus, str(dse_model))
    capsys.readouterr()
    again = DseKind(TINY_DSE).open(corpus, str(dse_model))
    assert "embedded" not in capsys.readouterr().err  # read from the corpus, nothing embedded
    assert np.array_equal(first.vectors.vectors, again.vectors.vectors)
    ident = again.identity()
    assert ident["kind"] == "dse" and ident["model"] == str(dse_model) and ident["pooling"] == "last token"
    assert ident["dims"] == 64 and ident["dtype"] == "float32" and len(str(ident["fingerprint"])) == 64
    assert ident["prompts"] == {"document": DOC_PROMPT, "query": QUERY_PROMPT}
    json.dumps(ident)  # recorded in the run's configuration as JSON
    folders = sorted(p.name for p in (corpus.root / "retrievers").iterdir() if p.is_dir())
    assert any(name.startswith("dse-") for name in folders)


def test_dse_defaults_are_heavens() -> None:
    o = DseOptions()
    assert (o.render.dpi, o.render.max_pixels, o.max_side) == (144, 4_000_000, 2048)
    assert (o.min_pixels, o.max_pixels, o.dims) == (28 * 28, 2560 * 28 * 28, 1536)
    assert (o.fetch_min_pixels, o.fetch_max_pixels) == (4 * 28 * 28, 16384 * 28 * 28)
    assert DOC_PROMPT == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                          "<|vision_start|><|image_pad|><|vision_end|>What is shown in this image?<|im_end|>\n"
                          "<|im_start|>assistant\n<|endoftext|>")
    assert QUERY_PROMPT.format(query="q").endswith("<|vision_end|>Query: q<|im_end|>\n<|im_start|>assistant\n"
                                                   "<|endoftext|>")


def test_qwen_resize_rule_by_hand() -> None:
    lo, hi = 4 * 28 * 28, 16384 * 28 * 28
    assert smart_resize(1, 1, lo, hi) == (56, 56)  # the model card's dummy query image
    assert smart_resize(1584, 1224, lo, hi) == (1596, 1232)  # a letter page at 144 dpi: 56.6 -> 57, 43.7 -> 44
    # over the cap: scaled by sqrt(area / cap), sides floored to 28
    assert smart_resize(2800, 2800, 28 * 28, 2560 * 28 * 28) == (1400, 1400)
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(10, 2010, lo, hi)


def test_dse_mrl_dims_slice_before_normalising(corpus: Corpus, dse_model: Path) -> None:
    full = DseKind(TINY_DSE).open(corpus, str(dse_model))
    cut = DseKind(DseOptions(render=RENDER, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, dims=16)).open(
        corpus, str(dse_model))
    assert cut.vectors.vectors.shape == (5, 16) and cut.identity()["dims"] == 16
    q_full, q_cut = full.encode_query(QUERIES[0]), cut.encode_query(QUERIES[0])
    assert np.linalg.norm(q_cut) == pytest.approx(1.0, abs=1e-5)
    # the same direction as the full vector's first 16 components (before normalising)
    assert np.allclose(q_cut, q_full[:16] / np.linalg.norm(q_full[:16]), atol=1e-5)


# -- ColQwen2 and ColPali ------------------------------------------------------------------


@pytest.mark.parametrize("family", [COLQWEN2, COLPALI_FAMILY], ids=["colqwen", "colpali"])
def test_late_interaction_ranks_pages_by_transformers_maxsim(corpus: Corpus, family: Family,
                                                             request: pytest.FixtureRequest) -> None:
    import torch
    import transformers

    folder: Path = request.getfixturevalue(f"{family.kind}_model")
    retriever = LateVisualKind(family, "test", LateOptions(render=RENDER, batch_size=2)).open(corpus, str(folder))
    proc = getattr(transformers, family.processor_class).from_pretrained(folder)
    model = getattr(transformers, family.model_class).from_pretrained(folder).eval()
    with torch.no_grad():
        pages = [model(**proc.process_images(images=[img])).embeddings[0] for img in _page_images(corpus)]
        keys = corpus.page_keys()
        for i, page in enumerate(pages):  # a page embedded alone: its rows, as stored
            stored = retriever.vectors.vectors[retriever.vectors.offsets[i]:retriever.vectors.offsets[i + 1]]
            assert np.allclose(stored, page.numpy(), atol=1e-4)
        for query in QUERIES:
            q = model(**proc.process_queries(text=[query])).embeddings[0]
            scores = proc.score_retrieval([q], pages)[0].numpy()
            expected = [keys[i][:2] for i in np.argsort(-scores, kind="stable")]
            got = retriever.search(query, k=5)
            assert [(h.document, h.page) for h in got] == expected
            assert [h.score for h in got] == pytest.approx(sorted(scores, reverse=True), abs=1e-3)


def test_colqwen_query_tokens_and_reranking_for_heaven(corpus: Corpus, colqwen_model: Path) -> None:
    retriever = LateVisualKind(COLQWEN2, "test", LateOptions(render=RENDER)).open(corpus, str(colqwen_model))
    tokens = retriever.encode_query("revenue")
    text = retriever.processor.tokenizer.decode(tokens.input_ids)
    assert text == "Query: revenue" + "<|endoftext|>" * 10 + "\n"  # prefix and 10 augmentation tokens
    assert tokens.vectors.shape == (len(tokens.input_ids), 16)
    assert np.allclose(np.linalg.norm(tokens.vectors, axis=1), 1.0, atol=1e-5)
    # MaxSim by hand for two query tokens (a filtered query) against two chosen pages
    sub = tokens.vectors[[1, 3]]
    v, off = retriever.vectors.vectors, retriever.vectors.offsets
    by_hand = []
    for i in (3, 0):
        rows = v[off[i]:off[i + 1]]
        by_hand.append(sum(max(float(np.dot(t, r)) for r in rows) for t in sub))
    keys = corpus.page_keys()
    assert retriever.score_pages(sub, [keys[3][:2], keys[0][:2]]) == pytest.approx(by_hand, abs=1e-5)
    ranked = retriever.search_vectors(sub, 2)
    assert ranked[0].score == pytest.approx(max(retriever.score_pages(sub, [k[:2] for k in keys])), abs=1e-5)


# -- the registry and the errors -----------------------------------------------------------


def test_visual_kinds_are_registered() -> None:
    assert kind("dse") is DSE and kind("colqwen") is COLQWEN and kind("colpali") is COLPALI
    for name in ("dse", "colqwen", "colpali"):
        assert kind(name).needs_model and kind(name).summary


def test_missing_model_says_how_to_fetch_it(corpus: Corpus) -> None:
    with pytest.raises(UserError, match=r"huggingface-cli download deskbench-tests/no-such-visual-model"):
        open_retriever("dse=deskbench-tests/no-such-visual-model", corpus)
    with pytest.raises(UserError, match="no model folder"):
        open_retriever("colqwen=./no/such/folder", corpus)
    with pytest.raises(UserError, match="needs a model"):
        open_retriever("colpali", corpus)


def test_a_model_of_another_kind_is_refused(corpus: Corpus, dse_model: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"colqwen=.*'qwen2_vl', not a 'colqwen2'") as err:
        open_retriever(f"colqwen={dse_model}", corpus)
    assert "\n" not in str(err.value)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(UserError, match="PEFT adapter, colpali_engine's format"):
        open_retriever(f"colqwen={adapter}", corpus)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no config.json"):
        open_retriever(f"dse={tmp_path / 'empty'}", corpus)


def test_corpus_search_runs_on_a_visual_retriever(corpus: Corpus, dse_model: Path) -> None:
    """What the agents call: Corpus.search answers from the retriever, with the page's text snippet."""
    own = Corpus.open(corpus.root)  # not the shared fixture: its retriever stays the page index
    own.retriever = DseKind(TINY_DSE).open(own, str(dse_model))
    hits = own.search("Harbour authority revenue", k=2)
    assert [(h.document, h.page, h.score) for h in hits] == [
        (p.document, p.page, p.score) for p in own.retriever.search("Harbour authority revenue", 2)]
    texts = own.store.texts([(h.document, h.page) for h in hits])
    for h in hits:  # the snippet is the page's own text, whatever ranked it
        words = set(h.snippet.replace("**", "").replace("\u2026", " ").split())
        assert words and words <= set(texts[(h.document, h.page)].split())


def test_dse_loads_the_hub_checkpoints_layout_and_its_pixel_bounds(corpus: Corpus, dse_model: Path,
                                                                    tmp_path: Path) -> None:
    """MrLight/dse-qwen2-2b-mrl-v1 stores its weights under the older names (model.layers...,
    visual...; HEAVEN renamed them by hand), as save_pretrained still writes them; transformers'
    conversion mapping reads them, and the same weights under the module's own names give the same
    vectors. The processor's pixel bounds are the retriever's, whatever the folder's say."""
    import shutil

    from safetensors.torch import load_file, save_file

    hub_names = load_file(dse_model / "model.safetensors")
    assert any(k.startswith("visual.") for k in hub_names) and any(k.startswith("model.layers.") for k in hub_names)
    own = tmp_path / "module-names"
    shutil.copytree(dse_model, own)
    renamed = {("model." + k if k.startswith("visual.") else k.replace("model.", "model.language_model.", 1)
                if k.startswith("model.") else k): v for k, v in hub_names.items()}
    assert any(k.startswith("model.visual.") for k in renamed) and "model.language_model.norm.weight" in renamed
    save_file(renamed, str(own / "model.safetensors"), metadata={"format": "pt"})
    new = DseKind(TINY_DSE).open(corpus, str(dse_model))
    old = DseKind(TINY_DSE).open(corpus, str(own))
    assert np.allclose(old.vectors.vectors, new.vectors.vectors, atol=1e-5)
    assert old.identity()["fingerprint"] != new.identity()["fingerprint"]  # another file: another index
    wide = DseKind(DseOptions(render=RENDER, min_pixels=MIN_PIXELS, max_pixels=4 * MAX_PIXELS)).open(
        corpus, str(dse_model))
    assert (wide.image_processor.size.shortest_edge, wide.image_processor.size.longest_edge) == (
        MIN_PIXELS, 4 * MAX_PIXELS)
    assert wide.identity()["images"]["pixels"] == [MIN_PIXELS, 4 * MAX_PIXELS]  # type: ignore[index]
