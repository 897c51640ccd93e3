"""`dense=MODEL`: a tiny sentence-transformers model (random weights, saved to a temp folder and
loaded through the retriever's own loading code) over a corpus whose page texts are known. The
expected rankings are computed in the test from the same model's vectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import ingest, write_text_pdf
from huggingface_hub import constants
from tiny_text_encoders import write_sentence_transformer

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.search import retriever as retrievers
from deskbench.search.embedded import dense, store
from deskbench.search.embedded.dense import DenseRetriever

DOCS = {
    "alpha.pdf": ["The annual report of the harbour.", "The mountain car and the river bridge."],
    "beta.pdf": ["The council budget for the library and the school.", "Weather forecast: rain and snow."],
}


def make_corpus(root: Path, docs: dict[str, list[str]]) -> Corpus:
    for name, pages in docs.items():
        write_text_pdf(root / "pdfs" / name, pages)
    corpus, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == len(docs) and not summary.files_failed
    return corpus


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dense-models")
    return {"plain": write_sentence_transformer(root / "plain", seed=1),
            "other": write_sentence_transformer(root / "other", seed=2),
            "prompted": write_sentence_transformer(root / "prompted", seed=3,
                                                   prompts={"query": "what is ", "document": "page "})}


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path, DOCS)


def expected(model: Path, corpus: Corpus, query: str, query_prompt: str = "",
             document_prompt: str = "") -> list[tuple[str, int, float]]:
    """Every page ranked by the cosine of the model's own (normalised) vectors, computed here."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model), device="cpu")
    keys = [(d, p) for d, p, _ in corpus.page_keys()]
    pages = st.encode([document_prompt + t for t in corpus.page_texts(keys)], normalize_embeddings=True, prompt="")
    q = st.encode([query_prompt + query], normalize_embeddings=True, prompt="")[0]
    scores = pages @ q
    return [(keys[i][0], keys[i][1], float(scores[i])) for i in np.argsort(-scores, kind="stable")]


def test_dense_ranks_the_page_whose_text_is_the_query_first(corpus: Corpus, models: dict[str, Path]) -> None:
    r = retrievers.open_retriever(f"dense={models['plain']}", corpus)
    assert isinstance(r, DenseRetriever)
    for doc, page, _ in corpus.page_keys():
        text = corpus.page_texts([(doc, page)])[0]
        hits = r.search(text, 4)
        assert (hits[0].document, hits[0].page) == (doc, page)
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)  # the same text, the same unit vector
        want = expected(models["plain"], corpus, text)
        assert [(h.document, h.page) for h in hits] == [(d, p) for d, p, _ in want]
        assert [h.score for h in hits] == pytest.approx([s for _, _, s in want], abs=1e-5)
    assert r.search("harbour", 2) == r.search("harbour", 4)[:2]
    assert r.search("harbour", 0) == []


def test_the_models_prompts_are_used_and_recorded(corpus: Corpus, models: dict[str, Path]) -> None:
    r = retrievers.open_retriever(f"dense={models['prompted']}", corpus)
    identity = r.identity()
    assert identity["prompts"] == {"query": "what is ", "document": "page "}
    assert identity["kind"] == "dense" and identity["model"] == str(models["prompted"])
    assert identity["dims"] == 32 and identity["max_seq_length"] == 128
    assert identity["fingerprint"] == retrievers.model_fingerprint(models["prompted"])
    want = expected(models["prompted"], corpus, "the harbour", "what is ", "page ")
    hits = r.search("the harbour", 4)
    assert [(h.document, h.page, h.score) for h in hits] == [(d, p, pytest.approx(s, abs=1e-5)) for d, p, s in want]
    # without the prompts the same model would give other scores: the prompts changed something
    plain = expected(models["prompted"], corpus, "the harbour")
    assert [s for *_, s in plain] != pytest.approx([s for *_, s in want], abs=1e-5)


def test_search_through_the_corpus_and_a_hybrid(corpus: Corpus, models: dict[str, Path]) -> None:
    corpus.use_retriever(f"dense={models['plain']}")
    text = corpus.page_texts([("beta.pdf", 2)])[0]
    hits = corpus.search(text, k=2)
    assert (hits[0].document, hits[0].page) == ("beta.pdf", 2)
    assert "snow" in hits[0].snippet.lower()
    hybrid = corpus.use_retriever(f"bm25+dense={models['plain']}")
    assert [p["kind"] for p in hybrid.identity()["parts"]] == ["bm25", "dense"]  # type: ignore[index]
    top = corpus.search("snow", k=1)[0]  # first for BM25 (the only page with the word) and for dense? fused:
    bm25 = corpus.index.search("snow", 100).pages
    dense_rank = [(h.document, h.page) for h in retrievers.open_retriever(f"dense={models['plain']}", corpus).search("snow", 100)]
    fused = {key: 1 / (60 + 1 + i) for i, key in enumerate(dense_rank)}
    for i, p in enumerate(bm25):
        fused[(p.document, p.page)] += 1 / (60 + 1 + i)
    best = max(fused.values())
    assert top.score == pytest.approx(best) and fused[(top.document, top.page)] == best


def test_the_index_is_built_once_then_only_new_pages_are_embedded(tmp_path: Path, models: dict[str, Path],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = make_corpus(tmp_path, DOCS)
    embedded: list[int] = []
    real = DenseRetriever._encode

    def counting(self: DenseRetriever, texts: list[str], prompt: str) -> np.ndarray:
        embedded.append(len(texts))
        return real(self, texts, prompt)

    monkeypatch.setattr(DenseRetriever, "_encode", counting)
    spec = f"dense={models['plain']}"
    first = retrievers.open_retriever(spec, corpus)
    assert sum(embedded) == 4 + 0  # four pages (the dimension comes from the model's config)
    folders = list((corpus.root / "retrievers").glob("dense-*"))
    assert len(folders) == 1 and (folders[0] / "vectors.npy").is_file()
    embedded.clear()
    again = retrievers.open_retriever(spec, corpus)
    assert embedded == []  # read from the corpus folder
    assert np.array_equal(first.vectors.vectors, again.vectors.vectors)  # type: ignore[attr-defined]
    write_text_pdf(tmp_path / "more" / "gamma.pdf", ["The museum and the train station."])
    ingest(tmp_path / "corpus", [tmp_path / "more"])
    corpus = Corpus.open(tmp_path / "corpus")
    grown = retrievers.open_retriever(spec, corpus)
    assert embedded == [1]  # only gamma's page
    assert [k[0] for k in grown.vectors.keys] == ["alpha.pdf", "alpha.pdf", "beta.pdf", "beta.pdf", "gamma.pdf"]  # type: ignore[attr-defined]
    text = corpus.page_texts([("gamma.pdf", 1)])[0]
    assert (grown.search(text, 1)[0].document) == "gamma.pdf"
    # other weights: another index, never the first one's vectors
    other = retrievers.open_retriever(f"dense={models['other']}", corpus)
    assert len(list((corpus.root / "retrievers").glob("dense-*"))) == 2
    assert other.identity()["fingerprint"] != grown.identity()["fingerprint"]
    stored = store.read(folders[0], {"kind": "dense", "fingerprint": grown.identity()["fingerprint"], "dims": 32,
                                     "prompts": {"query": "", "document": ""}, "max_seq_length": 128,
                                     "normalised": True})
    assert stored is not None and len(stored.keys) == 5


def test_a_hub_name_loads_from_the_local_cache_only(corpus: Corpus, models: dict[str, Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    with pytest.raises(UserError) as missing:
        retrievers.open_retriever("dense=tiny-org/tiny-dense", corpus)
    message = str(missing.value)
    assert "\n" not in message and "huggingface-cli download tiny-org/tiny-dense" in message
    assert "--retriever-download" in message and str(cache) in message
    # the same name once it is in the cache (the layout huggingface_hub writes): found, nothing fetched
    repo = cache / "models--tiny-org--tiny-dense"
    shutil.copytree(models["plain"], repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = retrievers.open_retriever("dense=tiny-org/tiny-dense", corpus)
    assert r.identity()["model"] == "tiny-org/tiny-dense"
    assert r.identity()["fingerprint"] == retrievers.model_fingerprint(models["plain"])


@pytest.mark.parametrize("model", ["./no/such/folder", "/no/such/model-folder"])
def test_a_missing_folder_is_one_line(corpus: Corpus, model: str) -> None:
    with pytest.raises(UserError) as err:
        retrievers.open_retriever(f"dense={model}", corpus)
    assert "\n" not in str(err.value) and "no model folder" in str(err.value) and model in str(err.value)


def test_a_folder_that_is_no_model_is_one_line(corpus: Corpus, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError) as err:
        retrievers.open_retriever(f"dense={tmp_path / 'empty'}", corpus)
    assert "\n" not in str(err.value) and "does not load" in str(err.value)
    with pytest.raises(UserError, match="needs a model"):
        retrievers.open_retriever("dense", corpus)


def test_dense_is_a_builtin_kind() -> None:
    k = retrievers.kind("dense")
    assert k is dense.DENSE and k.needs_model and "dense" in retrievers.names()


def test_download_only_when_the_run_allows_it(corpus: Corpus, models: dict[str, Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    asked: list[tuple[str, bool]] = []

    def snapshot(repo_id: str, local_files_only: bool = False) -> str:
        asked.append((repo_id, local_files_only))
        if local_files_only:
            raise huggingface_hub.errors.LocalEntryNotFoundError("not cached")
        return str(models["plain"])  # what a download would leave in the cache

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    with pytest.raises(UserError, match="--retriever-download"):
        retrievers.open_retriever("dense=tiny-org/fetched", corpus)
    r = retrievers.open_retriever("dense=tiny-org/fetched", corpus, allow_download=True)
    assert asked == [("tiny-org/fetched", True), ("tiny-org/fetched", False)]
    assert r.identity()["fingerprint"] == retrievers.model_fingerprint(models["plain"])


def test_a_checkpoint_missing_weights_is_refused_not_filled_at_random(corpus: Corpus, tmp_path: Path) -> None:
    """transformers fills a weight the checkpoint lacks with random values and only logs it: an index
    of random embeddings under the model's name. deskbench refuses such a model."""
    from safetensors.torch import load_file, save_file

    folder = write_sentence_transformer(tmp_path / "holed")
    weights = folder / "model.safetensors"
    state = load_file(str(weights))
    dropped = next(k for k in state if "encoder.layer.1.attention.self.query.weight" in k)
    del state[dropped]
    save_file(state, str(weights), metadata={"format": "pt"})
    with pytest.raises(UserError, match=r"has no weights for 1 of its parameters \(.*layer\.1\.attention\.self\.query\.weight\)"):
        DenseRetriever(corpus, str(folder))
