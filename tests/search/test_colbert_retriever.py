"""`colbert=MODEL`: a tiny ColBERT checkpoint (random weights, colbert-ir/colbertv2.0's layout, saved
to a temp folder and loaded through the retriever's own loading code). The token sequences are
written out by hand from ColBERT's tokenization (stanford-futuredata/ColBERT, colbert/modeling/
tokenization/), the vectors recomputed from the checkpoint as HF_ColBERT holds it, and MaxSim summed
in plain Python loops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ingest, write_text_pdf
from tiny_text_encoders import tiny_colbert, vocabulary, write_colbert

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.search import retriever as retrievers
from deskbench.search.embedded import colbert
from deskbench.search.embedded.colbert import ColbertEncoder, ColbertRetriever

V = vocabulary()
CLS, SEP, PAD, MASK, Q, D = V["[CLS]"], V["[SEP]"], V["[PAD]"], V["[MASK]"], V["[unused0]"], V["[unused1]"]
DOCS = {
    "alpha.pdf": ["The annual report of the harbour.", "The mountain car, and the river bridge!"],
    "beta.pdf": ["The council budget for the library and the school.", "Weather forecast: rain and snow."],
}


def ids(text: str) -> list[int]:
    return [V[w] for w in text.split()]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_colbert(tmp_path_factory.mktemp("colbert") / "tiny", seed=5)


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    for name, pages in DOCS.items():
        write_text_pdf(tmp_path / "pdfs" / name, pages)
    c, summary = ingest(tmp_path / "corpus", [tmp_path / "pdfs"])
    assert summary.files_ok == 2
    return c


def reference_vectors(checkpoint: Path, token_ids: list[int], attention: list[int]) -> np.ndarray:
    """normalize(linear(bert(ids))) with the checkpoint loaded as HF_ColBERT's layout, for one sequence."""
    import torch

    model = tiny_colbert().from_pretrained(checkpoint, dim=16).eval()
    with torch.no_grad():
        hidden = model.bert(input_ids=torch.tensor([token_ids]), attention_mask=torch.tensor([attention]))[0]
        return torch.nn.functional.normalize(model.linear(hidden), p=2, dim=2)[0].numpy()


def maxsim(query: np.ndarray, page: np.ndarray) -> float:
    total = 0.0
    for q in query:
        total += max(float(np.dot(q, d)) for d in page)
    return total


def test_a_query_is_marked_and_padded_with_masks_to_32_tokens(checkpoint: Path) -> None:
    enc = ColbertEncoder(checkpoint, "colbert=tiny")
    token_ids, attention = enc.query_tokens(["The annual report?"])
    want = [CLS, Q, *ids("the annual report ?"), SEP] + [MASK] * 25
    assert token_ids.tolist() == [want]
    assert attention.tolist() == [[1] * 7 + [0] * 25]  # the [MASK]s are not attended to (ColBERTv2)
    long = " ".join(["rain"] * 40)
    token_ids, attention = enc.query_tokens([long])
    assert token_ids.tolist() == [[CLS, Q, *[V["rain"]] * 29, SEP]] and attention.tolist() == [[1] * 32]
    assert enc.encode_query("The annual report?").shape == (32, 16)  # every position, masks included


def test_a_page_is_marked_and_its_punctuation_dropped(checkpoint: Path) -> None:
    enc = ColbertEncoder(checkpoint, "colbert=tiny")
    token_ids, attention = enc.doc_tokens(["The report, of the harbour.", "rain"])
    first = [CLS, D, *ids("the report , of the harbour ."), SEP]
    assert token_ids.tolist() == [first, [CLS, D, V["rain"], SEP] + [PAD] * 6]
    assert attention.tolist() == [[1] * 10, [1] * 4 + [0] * 6]
    vectors = enc.encode_docs(["The report, of the harbour.", "rain"])
    full = reference_vectors(checkpoint, first, [1] * 10)
    kept = [i for i, t in enumerate(first) if t not in (V[","], V["."])]
    assert vectors[0].shape == (8, 16)
    np.testing.assert_allclose(vectors[0], full[kept], atol=1e-5)
    assert vectors[1].shape == (4, 16)  # padding dropped
    np.testing.assert_allclose(vectors[1], reference_vectors(checkpoint, [CLS, D, V["rain"], SEP], [1] * 4), atol=1e-5)


def test_doc_maxlen_from_the_checkpoints_metadata_truncates(tmp_path: Path) -> None:
    enc = ColbertEncoder(write_colbert(tmp_path / "short", doc_maxlen=8, query_maxlen=10), "colbert=short")
    token_ids, _ = enc.doc_tokens(["the annual report of the harbour and the river"])
    assert token_ids.tolist() == [[CLS, D, *ids("the annual report of the"), SEP]]
    token_ids, _ = enc.query_tokens(["rain"])
    assert token_ids.tolist() == [[CLS, Q, V["rain"], SEP] + [MASK] * 6]


def test_pages_rank_by_maxsim_computed_by_hand(corpus: Corpus, checkpoint: Path) -> None:
    r = retrievers.open_retriever(f"colbert={checkpoint}", corpus)
    assert isinstance(r, ColbertRetriever)
    query = "the harbour report"
    q_ids = [CLS, Q, *ids(query), SEP] + [MASK] * 26
    q_vectors = reference_vectors(checkpoint, q_ids, [1] * 6 + [0] * 26)
    expected = []
    enc = r.encoder
    for doc, page, _ in corpus.page_keys():
        text = corpus.page_texts([(doc, page)])[0]
        token_ids, _ = enc.doc_tokens([text])
        row = token_ids[0].tolist()
        page_vectors = reference_vectors(checkpoint, row, [1] * len(row))
        keep = [i for i, t in enumerate(row) if t not in enc.skiplist]
        expected.append((doc, page, maxsim(q_vectors, page_vectors[keep])))
    expected.sort(key=lambda e: -e[2])
    hits = r.search(query, 4)
    assert [(h.document, h.page) for h in hits] == [(d, p) for d, p, _ in expected]
    assert [h.score for h in hits] == pytest.approx([s for *_, s in expected], abs=1e-4)
    assert r.search(query, 1) == hits[:1] and r.search(query, 0) == []


def test_stored_once_recorded_and_searched_through_the_corpus(corpus: Corpus, checkpoint: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    first = corpus.use_retriever(f"colbert={checkpoint}")
    identity = first.identity()
    assert identity["kind"] == "colbert" and identity["scoring"] == "maxsim"
    assert identity["query_maxlen"] == 32 and identity["doc_maxlen"] == 180 and identity["dim"] == 16
    assert identity["fingerprint"] == retrievers.model_fingerprint(checkpoint)
    folders = list((corpus.root / "retrievers").glob("colbert-*"))
    assert len(folders) == 1
    offsets = np.load(folders[0] / "offsets.npy")
    assert len(offsets) == 5 and np.all(np.diff(offsets) >= 3)  # [CLS] [D] ... [SEP] at least, per page
    calls: list[int] = []
    monkeypatch.setattr(ColbertEncoder, "encode_docs", lambda self, docs: calls.append(len(docs)) or [])
    again = corpus.use_retriever(f"colbert={checkpoint}")
    assert calls == []  # read back from the corpus folder
    hits = corpus.search("rain and snow", k=2)
    assert [(h.document, h.page) for h in hits] == [(h.document, h.page) for h in again.search("rain and snow", 2)]
    hybrid = corpus.use_retriever(f"bm25+colbert={checkpoint}")
    assert [p["kind"] for p in hybrid.identity()["parts"]] == ["bm25", "colbert"]  # type: ignore[index]
    assert len(corpus.search("snow", k=3)) == 3


def test_a_pytorch_model_bin_checkpoint_loads_the_same(tmp_path: Path, checkpoint: Path) -> None:
    import torch

    model = tiny_colbert().from_pretrained(checkpoint, dim=16)
    binary = tmp_path / "bin"
    model.config.save_pretrained(binary)  # colbertv2.0 ships pytorch_model.bin: HF_ColBERT's state dict
    torch.save(model.state_dict(), binary / "pytorch_model.bin")
    for name in ("tokenizer.json", "tokenizer_config.json", "artifact.metadata"):
        (binary / name).write_bytes((checkpoint / name).read_bytes())
    assert (binary / "pytorch_model.bin").is_file() and not (binary / "model.safetensors").exists()
    a, b = ColbertEncoder(checkpoint, "a"), ColbertEncoder(binary, "b")
    np.testing.assert_allclose(a.encode_query("rain"), b.encode_query("rain"), atol=1e-6)


def test_checkpoints_that_are_not_colbert_are_one_line(tmp_path: Path, corpus: Corpus) -> None:
    no_meta = write_colbert(tmp_path / "no-meta", metadata=False)  # ColBERT's defaults: dim 128, not 16
    with pytest.raises(UserError, match=r"linear.weight .* is \(16, 32\), not \(dim 128, hidden 32\)") as err:
        retrievers.open_retriever(f"colbert={no_meta}", corpus)
    assert "\n" not in str(err.value)
    plain = tmp_path / "bert"
    tiny_colbert().from_pretrained(write_colbert(tmp_path / "x"), dim=16).bert.save_pretrained(plain)
    (plain / "tokenizer.json").write_bytes((tmp_path / "x" / "tokenizer.json").read_bytes())
    (plain / "tokenizer_config.json").write_bytes((tmp_path / "x" / "tokenizer_config.json").read_bytes())
    with pytest.raises(UserError, match="no ColBERT projection"):
        retrievers.open_retriever(f"colbert={plain}", corpus)
    l2 = write_colbert(tmp_path / "l2")
    (l2 / "artifact.metadata").write_text('{"similarity": "l2", "dim": 16}')
    with pytest.raises(UserError, match="cosine MaxSim only"):
        retrievers.open_retriever(f"colbert={l2}", corpus)
    with pytest.raises(UserError, match="needs a model"):
        retrievers.open_retriever("colbert", corpus)
    with pytest.raises(UserError, match="no model folder"):
        retrievers.open_retriever(f"colbert={tmp_path / 'missing'}", corpus)


def test_colbert_is_a_builtin_kind() -> None:
    assert retrievers.kind("colbert") is colbert.COLBERT and "colbert" in retrievers.names()
