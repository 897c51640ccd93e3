"""HEAVEN (`--retriever heaven=DSE,COLQWEN`): its formulas on constructed numbers computed by hand,
its VS-page grouping (MADQA's baselines/heaven/vs_pages.py Assemble, as the official code runs
it), the query-token split, and the retriever end to end on tiny random DSE and ColQwen2 models
(tests/tiny_vision_encoders.py) over a small corpus, its ranking recomputed in the test from the
models' own vectors with plain numpy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ingest, write_text_pdf

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.search.embedded import heaven, heaven_vs
from deskbench.search.embedded.heaven import (
    ClosedClassTagger,
    HeavenOptions,
    parse_model,
    split_tokens,
    stage1,
    stage2,
)

# -- stage 1 ------------------------------------------------------------------------------------


def test_stage1_combines_vs_page_and_page_scores_with_alpha_after_the_vs_filter() -> None:
    # pages 0..3; VS-page 0 holds pages 0 and 1, VS-page 1 holds pages 1, 2, 3
    page_sims = np.array([0.9, 0.5, 0.3, 0.1])
    vs_sims = np.array([0.2, 0.6])
    got = stage1(page_sims, vs_sims, [[0, 1], [1, 2, 3]], alpha=0.1, vs_filter=0.75, k=3)
    # VS-scores (best VS-page): 0.2, 0.6, 0.6, 0.6; keep int(4 * 0.75) = 3 pages: 1, 2, 3, so page 0's
    # page score is zeroed (its VS part stays): 0.1*0.2 = 0.02; page 1: 0.1*0.6 + 0.9*0.5 = 0.51;
    # page 2: 0.06 + 0.27 = 0.33; page 3: 0.06 + 0.09 = 0.15
    assert [i for i, _ in got] == [1, 2, 3]
    assert [round(s, 10) for _, s in got] == [0.51, 0.33, 0.15]
    # all four: page 0, the best by its own similarity, comes last
    assert [i for i, _ in stage1(page_sims, vs_sims, [[0, 1], [1, 2, 3]], 0.1, 0.75, 10)] == [1, 2, 3, 0]


def test_stage1_without_vs_pages_ranks_by_page_similarity() -> None:
    assert stage1(np.array([0.1, 0.7, 0.4]), None, [], 0.1, 0.5, 2) == [(1, 0.7), (2, 0.4)]


# -- stage 2 ------------------------------------------------------------------------------------

Q = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
PAGES = {0: np.array([[1.0, 0.0]]), 1: np.array([[0.8, 0.6], [0.0, 1.0]]), 2: np.array([[0.6, 0.8]])}
CANDIDATES = [(0, 0.5), (1, 0.4), (2, 0.3)]


def _maxsim(query: np.ndarray, pages: list[int]) -> list[float]:
    calls.append(list(pages))
    return [float((query @ PAGES[p].T).max(axis=1).sum()) for p in pages]


calls: list[list[int]] = []


def test_stage2_scores_key_tokens_refines_then_adds_non_key_tokens_and_beta() -> None:
    calls.clear()
    got = stage2(CANDIDATES, Q, ([0], [1]), _maxsim, k=2, rho=0.25, beta=0.3)
    # key token [1,0]: page 0 -> 1, page 1 -> 0.8, page 2 -> 0.6; keep max(k=2, int(3*0.25)=0) = 2: pages 0, 1
    # non-key token [0,1]: page 0 -> 0, page 1 -> 1
    # page 0: 0.3*0.5 + 0.7*(1 + 0) = 0.85; page 1: 0.3*0.4 + 0.7*(0.8 + 1) = 1.38
    assert [(i, round(s, 10)) for i, s in got] == [(1, 1.38), (0, 0.85)]
    assert calls == [[0, 1, 2], [0, 1]]  # non-key tokens only on the refined candidates


def test_stage2_without_filtering_uses_every_query_token() -> None:
    got = stage2(CANDIDATES, Q, None, _maxsim, k=2, rho=0.25, beta=0.3)
    # page 0: 1 + 0 + 0.6 = 1.6; page 1: 0.8 + 1 + max(0.96, 0.8) = 2.76; page 2: 0.6 + 0.8 + 1 = 2.4
    # with beta: 0.15 + 1.12 = 1.27, 0.12 + 1.932 = 2.052, 0.09 + 1.68 = 1.77
    assert [(i, round(s, 10)) for i, s in got] == [(1, 2.052), (2, 1.77)]


def test_stage2_with_no_key_token_scores_the_first_pass_on_all_tokens() -> None:
    got = stage2(CANDIDATES, Q, ([], [1]), _maxsim, k=1, rho=0.25, beta=0.0)
    # all tokens: 1.6, 2.76, 2.4; keep max(1, 0) = 1: page 1, plus its non-key score 1 -> 3.76
    assert [(i, round(s, 10)) for i, s in got] == [(1, 3.76)]


# -- query-token split ---------------------------------------------------------------------------


class _Tagger:
    name = "recorded"

    def __init__(self, tags: dict[str, str]) -> None:
        self.tags = tags
        self.seen: list[list[str]] = []

    def tag(self, tokens: list[str]) -> list[str]:
        self.seen.append(list(tokens))
        return [self.tags.get(t, "NN") for t in tokens]

    def words(self, text: str) -> list[str]:
        return text.split()


def test_split_tokens_as_the_official_filter() -> None:
    tagger = _Tagger({":": ":", "of": "IN", "2021": "CD"})
    decoded = ["Query", ":", " total", " REVENUE", " of", " 2021", "<|endoftext|>", "<|endoftext|>", None]
    key, other = split_tokens(decoded, tagger) or ([], [])
    # the first kept token ("Query") is neither; <|endoftext|> and padding are dropped; "REVENUE" is lowered
    assert tagger.seen == [["Query", ":", "total", "revenue", "of", "2021"]]
    assert (key, other) == ([2, 3], [1, 4, 5])


def test_closed_class_fallback_tagger() -> None:
    tags = ClosedClassTagger().tag(["What", "was", "the", "revenue", "in", "2021", "?", "Harbour"])
    assert tags == ["X", "X", "X", "NN", "X", "CD", ":", "NN"]
    assert "fallback" in ClosedClassTagger.name and "NLTK" in ClosedClassTagger.name


def test_split_words_shifts_by_the_extra_vectors() -> None:
    key, other = heaven.split_words("total revenue of", 7, _Tagger({"of": "IN"}))
    assert (key, other) == ([2, 3], [4])  # (7 - 3) // 2 = 2


# -- VS-pages ---------------------------------------------------------------------------------------


def test_plan_too_few_regions_is_one_image_of_every_page() -> None:
    assert heaven_vs.plan([0, 0, 1], 5, 15) == heaven_vs.Plan(True, [], [[0, 1, 2, 3, 4]])


def test_plan_small_corpus_is_one_vs_page_of_every_region_covering_every_page() -> None:
    got = heaven_vs.plan([0, 2, 2, 5, 7], 10, 15)
    assert got.chunks == [[0, 1, 2, 3, 4]] and got.pages == [list(range(10))]


def test_plan_chunks_and_fills_uncovered_pages_into_growing_ranges() -> None:
    # 8 regions over 40 pages, r = 15: ceil(8 * 15 / 40) = 3 regions a chunk -> chunks of regions
    # [0,1,2], [3,4,5], [6,7] on pages {0,1,5}, {10,20,21}, {30,39}. Uncovered pages in order: 2..4 lie
    # in chunk 0's range; 6..9 are nearest chunk 0 (9: a tie with chunk 1, the first wins); 22..29 go
    # to chunk 1 one by one, its range growing (26 would be nearer chunk 2 without the growth).
    got = heaven_vs.plan([0, 1, 5, 10, 20, 21, 30, 39], 40, 15)
    assert got.chunks == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert got.pages == [list(range(0, 10)), list(range(10, 30)), list(range(30, 40))]


def test_grid_plan_is_consecutive_pages() -> None:
    assert heaven_vs.grid_plan(5, 2).pages == [[0, 1], [2, 3], [4]]


def test_stack_centres_regions_on_white_at_the_widest() -> None:
    a = np.zeros((2, 4, 3), np.uint8)
    b = np.full((3, 2, 3), 7, np.uint8)
    out = heaven_vs.stack([a, b])
    assert out.shape == (5, 4, 3)
    assert (out[:2] == 0).all() and (out[2:, 1:3] == 7).all() and (out[2:, [0, 3]] == 255).all()


def test_grid_cells_follow_the_average_size() -> None:
    images = [np.zeros((100, 50, 3), np.uint8)] * 5
    # ceil(sqrt 5) = 3 columns; 3 * 2 >= 5 so 2 rows; cell 100 x 50 (area 5000, aspect 0.5); padding 5
    assert heaven_vs.grid(images).shape == (2 * 100 + 5, 3 * 50 + 2 * 5, 3)


def test_vs_page_image_cuts_each_chunks_regions_and_stacks_them() -> None:
    pages = {0: np.full((100, 100, 3), 10, np.uint8), 1: np.full((100, 100, 3), 20, np.uint8)}
    seen: list[int] = []

    def page_image(i: int) -> np.ndarray:
        seen.append(i)
        return pages[i]

    regions = [heaven_vs.Region(0, (0.0, 0.0, 0.5, 0.1)), heaven_vs.Region(0, (0.0, 0.5, 0.2, 0.6)),
               heaven_vs.Region(1, (0.1, 0.1, 0.4, 0.3))]
    plan = heaven_vs.Plan(False, [[0, 1], [2]], [[0], [1]])
    first = heaven_vs.vs_page_image(plan, 0, regions, page_image)
    # 50x10 and 20x10 cuts stacked: 20 rows at width 50, the narrow one centred (15 white columns a side)
    assert first.shape == (20, 50, 3) and (first[:10] == 10).all() and (first[10:, 15:35] == 10).all()
    assert (first[10:, :15] == 255).all() and seen == [0]  # one render for both regions of page 0
    assert heaven_vs.vs_page_image(plan, 1, regions, page_image).shape == (20, 30, 3)
    whole = heaven_vs.Plan(True, [], [[0, 1]])
    assert heaven_vs.vs_page_image(whole, 0, regions, page_image).shape == (100, 200, 3)  # side by side


def test_crop_drops_empty_boxes_and_turns_tall_ones() -> None:
    image = np.arange(100 * 100 * 3, dtype=np.uint8).reshape(100, 100, 3)
    assert heaven_vs.crop(image, (0.5, 0.5, 0.505, 0.6)) is None  # int(50.5) == 50: no width
    tall = heaven_vs.crop(image, (0.1, 0.0, 0.12, 0.9))
    assert tall is not None and tall.shape == (2, 90, 3)


def test_title_boxes_from_a_text_layer() -> None:
    def run(text: str, size: float, left: float, bottom: float, top: float) -> list[Any]:
        return [(ch, size, (left + 5 * i, bottom, left + 5 * i + 5, top)) for i, ch in enumerate(text)]

    chars = [*run("Big Title", 14.0, 10, 170, 185), ("\n", 0.0, (0, 0, 0, 0)),
             *run("body text that is long", 10.0, 10, 100, 110), ("\n", 0.0, (0, 0, 0, 0)),
             *run("more body", 10.0, 10, 80, 90)]
    boxes = heaven_vs.title_boxes(chars, 100.0, 200.0, 1.2)
    assert boxes == [(0.1, (200 - 185) / 200, (10 + 5 * 9) / 100, (200 - 170) / 200)]


# -- the spec's options ---------------------------------------------------------------------------


def test_parse_model_and_options() -> None:
    dse, colqwen, options = parse_model("/m/dse,/m/cq,k1=100,alpha=0.2,layout=grid,query_filtering=false")
    assert (dse, colqwen) == ("/m/dse", "/m/cq")
    assert options == HeavenOptions(k1=100, alpha=0.2, layout="grid", query_filtering=False)
    assert parse_model("/m/dse") == ("/m/dse", None, HeavenOptions())
    defaults = HeavenOptions()  # MADQA's example.sh = the paper's Table 13
    assert (defaults.k1, defaults.k2, defaults.reduction_factor, defaults.vs_filter, defaults.rho, defaults.alpha,
            defaults.beta) == (200, 5, 15, 0.5, 0.25, 0.1, 0.3)
    for bad, said in [("/m/dse,k1=x", "k1 takes a int"), ("/m/dse,kk=1", "no option 'kk'"),
                      ("/m/dse,layout=yolo", "choose one of"), ("a,b,c", "give the DSE model")]:
        with pytest.raises(UserError, match=said):
            parse_model(bad)


# -- end to end on tiny models ----------------------------------------------------------------------
# (torch is imported where used, never at module level: every xdist worker collects this file)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tiny_vision_encoders import MAX_PIXELS, MIN_PIXELS, write_tiny_colqwen2, write_tiny_dse

    from deskbench.search.embedded.late_visual import COLQWEN2, LateOptions, LateVisualRetriever
    from deskbench.search.embedded.visual import DseOptions, DseRetriever, PageRender, find_model

    root = tmp_path_factory.mktemp("heaven")
    write_text_pdf(root / "pdfs" / "a.pdf", ["Harbour authority revenue 2021 " * 10, "Minutes of the board"])
    write_text_pdf(root / "pdfs" / "b.pdf", ["School budget and library", "Weather: rain and snow " * 5,
                                             "Annual report of the council"])
    corpus, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    render = PageRender(dpi=36, max_pixels=200_000)
    dse_folder = find_model("dse", str(write_tiny_dse(root / "dse", seed=3)), allow_download=False)
    cq_folder = find_model("colqwen", str(write_tiny_colqwen2(root / "cq", seed=4)), allow_download=False)
    dse = DseRetriever(corpus, dse_folder, DseOptions(render=render, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS))
    colqwen = LateVisualRetriever(corpus, cq_folder, COLQWEN2, LateOptions(render=render))
    return {"corpus": corpus, "dse": dse, "colqwen": colqwen}


def _expected(h: heaven.HeavenRetriever, query: str, k: int, split: tuple[list[int], list[int]]) -> list[Any]:
    """The ranking recomputed with numpy from the stored vectors (module docstring's formulas)."""
    o = h.options
    q = h.dse_query(query)
    n = len(h.keys)
    page_sims = h.dse.vectors.vectors @ q
    assert h.vs_vectors is not None
    vs_sims = h.vs_vectors @ q
    vs_score = np.array([max(vs_sims[v] for v, g in enumerate(h.vs_pages) if p in g) for p in range(n)])
    mask = np.zeros(n)
    mask[np.argsort(vs_score)[::-1][:max(1, int(n * o.vs_filter))]] = 1
    s1 = o.alpha * vs_score + (1 - o.alpha) * page_sims * mask
    cands = list(np.argsort(s1)[::-1][:o.k1])
    assert h.colqwen is not None
    qt = h.colqwen.encode_query(query).vectors
    pv = h.colqwen.vectors

    def ms(rows: np.ndarray, i: int) -> float:
        return float((rows @ pv.vectors[pv.offsets[i]:pv.offsets[i + 1]].T).max(axis=1).sum())

    key, other = split
    ks = {i: ms(qt[key], i) for i in cands}
    kept = sorted(cands, key=lambda i: ks[i], reverse=True)[:max(k, int(len(cands) * o.rho))]
    final = {i: o.beta * s1[i] + (1 - o.beta) * (ks[i] + (ms(qt[other], i) if other else 0.0)) for i in kept}
    return [h.keys[i][:2] for i in sorted(kept, key=lambda i: final[i], reverse=True)[:k]]


def test_heaven_end_to_end_with_grid_vs_pages(setup: dict[str, Any]) -> None:
    options = HeavenOptions(layout="grid", reduction_factor=2, k1=4, alpha=0.3, vs_filter=0.6)
    h = heaven.HeavenRetriever(setup["corpus"], setup["dse"], setup["colqwen"], options, None, ClosedClassTagger())
    assert h.vs_pages == [[0, 1], [2, 3], [4]]  # 5 pages, 2 a grid
    query = "Harbour revenue 2021"
    assert h.colqwen is not None
    q = h.colqwen.encode_query(query)
    split = h.split(query, q.vectors, q.input_ids)
    assert split is not None and split[0]  # the tiny byte tokenizer's letters tag as nouns
    got = [(p.document, p.page) for p in h.search(query, 3)]
    assert got == _expected(h, query, 3, split)
    ident = h.identity()
    assert ident["kind"] == "heaven" and ident["vs_pages"] == 3 and ident["options"] == options.record()
    assert "grid" in str(ident["dla"]) and "fallback" in str(ident["pos_tagger"])


def test_heaven_text_layer_fallback_builds_once_and_names_itself(setup: dict[str, Any]) -> None:
    corpus: Corpus = setup["corpus"]
    options = HeavenOptions(k1=5)
    detector = heaven_vs.layout_detector("text-layer", allow_download=False)
    h = heaven.HeavenRetriever(corpus, setup["dse"], setup["colqwen"], options, detector, ClosedClassTagger())
    # each page's 16 pt title over 11 pt body: 5 regions, a corpus of at most 20 pages: one VS-page
    assert h.vs_pages == [[0, 1, 2, 3, 4]]
    assert h.identity()["dla"] == "text-layer titles (fallback; official: DocLayout-YOLO)"
    folder = h.vs_folder
    assert folder is not None and folder.parent == corpus.root / "retrievers"
    stamp = (folder / "vectors.npy").stat().st_mtime_ns
    assert json.loads(folder.with_name(folder.name + ".groups.json").read_text()) == [[0, 1, 2, 3, 4]]
    again = heaven.HeavenRetriever(corpus, setup["dse"], setup["colqwen"], options, detector, ClosedClassTagger())
    assert again.vs_pages == h.vs_pages and (folder / "vectors.npy").stat().st_mtime_ns == stamp
    assert again.vs_vectors is not None and h.vs_vectors is not None
    assert np.array_equal(again.vs_vectors, h.vs_vectors)
    assert len(h.search("board minutes", 5)) == 5


def test_a_vs_page_qwen2_vl_cannot_take_gets_a_zero_vector(setup: dict[str, Any]) -> None:
    h = heaven.HeavenRetriever(setup["corpus"], setup["dse"], setup["colqwen"], HeavenOptions(vs_pages=False), None,
                               ClosedClassTagger())
    normal = np.full((60, 40, 3), 200, np.uint8)
    sliver = np.full((201 * 28, 20, 3), 0, np.uint8)  # aspect ratio over 200: smart_resize refuses it
    rows = h._embed_vs([normal, sliver])
    assert np.array_equal(rows[1], np.zeros((1, rows[0].shape[1]), np.float32))
    (alone,) = setup["dse"].embed_images([setup["dse"].page_image(heaven._pil(normal))])
    assert np.allclose(rows[0], alone, atol=1e-5) and abs(float(np.linalg.norm(rows[0])) - 1) < 1e-4


def test_heaven_kind_is_registered_and_refuses_a_missing_model(setup: dict[str, Any], tmp_path: Path) -> None:
    from deskbench.search.retriever import kind

    k = kind("heaven")
    assert k.needs_model and "HEAVEN" in k.summary
    with pytest.raises(UserError, match="no model folder"):
        k.open(setup["corpus"], str(tmp_path / "nothing") + ",/x", allow_download=False)


# -- the official tools when installed: NLTK's tagger and DocLayout-YOLO (doubles in sys.modules) --------


def _module(name: str, **attrs: Any) -> Any:
    import importlib.machinery
    import types

    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def test_nltk_tagger_is_used_only_when_its_data_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    found: list[str] = []

    def find(path: str) -> str:
        found.append(path)
        if not installed:
            raise LookupError(path)
        return path

    installed = False
    fake = _module("nltk", data=types.SimpleNamespace(find=find),
                   pos_tag=lambda tokens: [(t, "NNP" if t[:1].isupper() else "VBD") for t in tokens])
    monkeypatch.setitem(__import__("sys").modules, "nltk", fake)
    assert isinstance(heaven.pos_tagger(), ClosedClassTagger)  # nltk without its data: the fallback
    installed = True
    tagger = heaven.pos_tagger()
    assert isinstance(tagger, heaven.NltkTagger) and "official" in tagger.name
    assert found == ["taggers/averaged_perceptron_tagger_eng"] * 2  # looked up, never downloaded
    assert split_tokens(["Query", ":", " Harbour", " grew"], tagger) == ([2], [1, 3])


def test_doclayout_yolo_when_installed_keeps_title_classes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import types

    import huggingface_hub
    import torch

    calls: list[dict[str, Any]] = []

    class YOLOv10:
        def __init__(self, path: str) -> None:
            self.path = path

        def predict(self, image: np.ndarray, **kw: Any) -> list[Any]:
            calls.append({"first_pixel": image[0, 0].tolist(), **kw})
            boxes = types.SimpleNamespace(cls=[torch.tensor(9.0), torch.tensor(10.0), torch.tensor(7.0)],
                                          xyxyn=[torch.tensor([0.0, 0.0, 1.0, 1.0]), torch.tensor([0.1, 0.2, 0.5, 0.25]),
                                                 torch.tensor([0.1, 0.5, 0.3, 0.55])])
            return [types.SimpleNamespace(boxes=boxes)]

    monkeypatch.setitem(__import__("sys").modules, "doclayout_yolo", _module("doclayout_yolo", YOLOv10=YOLOv10))
    asked: list[tuple[str, str, bool]] = []

    def download(repo: str, filename: str, local_files_only: bool = False) -> str:
        asked.append((repo, filename, local_files_only))
        return str(tmp_path / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    detector = heaven_vs.layout_detector("auto", allow_download=False)
    assert isinstance(detector, heaven_vs.DocLayoutYolo) and "DocLayout-YOLO" in detector.name
    assert asked == [(heaven_vs.DLA_REPO, heaven_vs.DLA_FILE, True)]
    image = np.zeros((10, 10, 3), np.uint8)
    image[0, 0] = [1, 2, 3]  # RGB; the model is handed BGR, as the official cv2 arrays are
    boxes = detector.titles(None, 1, image)
    assert np.allclose(boxes, [(0.1, 0.2, 0.5, 0.25), (0.1, 0.5, 0.3, 0.55)])  # Text (9) left out
    assert calls[0]["first_pixel"] == [3, 2, 1] and calls[0]["imgsz"] == 1024 and calls[0]["conf"] == 0.2


def test_doclayout_yolo_asked_for_but_missing_is_one_line() -> None:
    with pytest.raises(UserError, match="DocLayout-YOLO is not available"):
        heaven_vs.layout_detector("doclayout-yolo", allow_download=False)
    assert isinstance(heaven_vs.layout_detector("auto", allow_download=False), heaven_vs.TextLayerTitles)
    assert heaven_vs.layout_detector("grid", allow_download=False) is None
