"""The managed-RAG baselines (MADQA G.2; agents/managed_rag/) end to end against their strict
simulators: `deskbench run --agent openai-file-search` (and gemini-file-search) uploads the
corpus's PDFs once, asks each question with the official script's request, reads the reply as the
script does, and its run scores as the script's own predictions file would; a rerun uploads
nothing; a failed indexing is an episode error naming the file; `deskbench stores delete` removes
what deskbench made."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import ingest, run_cli
from PIL import Image
from sim_gemini_file_search import SimGeminiFileSearch
from sim_openai_file_search import SimFileSearch

from deskbench.tracks.docqa.agents.managed_rag.prompts import (
    GEMINI_PROMPT,
    OPENAI_INSTRUCTIONS,
    official_parse,
)

# the openai SDK marks every Assistants call deprecated; the official script (and so the agent) uses them
pytestmark = [pytest.mark.filterwarnings(f"ignore::DeprecationWarning:{module}") for module in (
    "deskbench.tracks.docqa.agents.managed_rag.openai_fs", "test_managed_rag")]

TASKS = [
    {"id": "q1", "question": "Which engine powers the Bell 407?", "answer_variants": [["Rolls-Royce 250-C47B"]],
     "evidence": [{"document": "manual.pdf", "page": 1}]},
    {"id": "q2", "question": "Who publishes the annual report?", "answer_variants": [["the harbour authority"]],
     "evidence": [{"document": "report.pdf", "page": 1}]},
    {"id": "q3", "question": "What colour is the cabin?", "answer_variants": [["blue"]],
     "evidence": [{"document": "manual.pdf", "page": 2}]},
]
# what the service's model says to each question (the official scripts' replies are free text)
REPLIES = {
    "Which engine powers the Bell 407?": ('Found it.\n{"answer": ["Rolls-Royce 250-C47B"], "citations": '
                                          '[{"file": "manual.pdf", "page": 1}]}', ["manual.pdf"]),
    "Who publishes the annual report?": ("The harbour authority publishes it.", ["report.pdf"]),  # no JSON
    "What colour is the cabin?": ('{"answer": "red", "citations": [{"file": "manual.pdf", "page": "two"}]}', []),
}


def make_corpus(root: Path, docs: dict[str, int]) -> Path:
    """PDFs of blank pages (`docs`: name -> pages) ingested without OCR: the corpus folder."""
    (root / "pdfs").mkdir(parents=True)
    for i, (name, n) in enumerate(docs.items()):
        pages = [Image.new("RGB", (144, 108), (255, 255 - 40 * k, 200 - 30 * i)) for k in range(n)]
        pages[0].save(root / "pdfs" / name, resolution=72.0, save_all=True, append_images=pages[1:])
    _, summary = ingest(root / "corpus", [root / "pdfs"], ocr="never")
    assert summary.files_ok == len(docs)
    return root / "corpus"


@pytest.fixture(autouse=True)
def _quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts sleep 1 s (OpenAI, between polls of a run) and 2 s (Gemini, between polls of an
    operation); the simulators answer at once, so the tests poll every 10 ms."""
    monkeypatch.setattr("deskbench.tracks.docqa.agents.managed_rag.openai_fs.POLL", 0.01)
    monkeypatch.setattr("deskbench.tracks.docqa.agents.managed_rag.gemini_fs.OPERATION_POLL", 0.01)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "c", {"manual.pdf": 2, "report.pdf": 1})


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    return path


def openai_answer(question: str, files: dict[str, bytes]) -> dict[str, Any]:
    text, cite = REPLIES[question]
    assert set(files) == {"manual.pdf", "report.pdf"} and all(b.startswith(b"%PDF") for b in files.values())
    return {"text": text, "cite": cite, "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}


def episodes(run: Path) -> dict[str, tuple[str, dict[str, Any] | None, str | None, list[Any]]]:
    rows = sqlite3.connect(run / "run.sqlite").execute(
        "SELECT task_id, status, submission, error, trajectory FROM episodes").fetchall()
    return {r[0]: (r[1], json.loads(r[2]) if r[2] else None, r[3], json.loads(r[4] or "[]")) for r in rows}


def scored(*args: str) -> dict[str, Any]:
    proc = run_cli("score", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


METRICS = ("n", "accuracy", "mean_anls", "doc_f1", "page_f1")


# --- the official reading of a reply ------------------------------------------------------------------
def test_replies_are_read_as_the_scripts_read_them() -> None:
    assert official_parse('x {"answer": ["a"], "citations": [{"file": "f.pdf", "page": 2}]} y') == (
        {"answer": ["a"], "citations": [{"file": "f.pdf", "page": 2}]}, True)
    assert official_parse("  just text \n") == ({"answer": ["just text"], "citations": []}, False)
    assert official_parse('{"answer": ["a"]}') == ({"answer": ['{"answer": ["a"]}'], "citations": []}, False)
    assert official_parse('{"answer": "a", "citations": [] broken') [1] is False
    # the two scripts' prompts: Gemini's is the paper's Prompt 6; OpenAI's IMPORTANT line is shorter
    assert "Search carefully using different terms if needed." in GEMINI_PROMPT
    assert "Search carefully.\n" in OPENAI_INSTRUCTIONS and "different terms" not in OPENAI_INSTRUCTIONS


# --- OpenAI File Search -------------------------------------------------------------------------------
def run_openai(tasks: Path, corpus: Path, out: Path, sim: SimFileSearch, monkeypatch: pytest.MonkeyPatch,
               model: str = "openai/gpt-4o") -> Any:
    for k, v in sim.env().items():
        monkeypatch.setenv(k, v)
    return run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus), "--agent", "openai-file-search",
                   "--model", model, "--out", str(out), "--json", "--quiet")


def test_openai_file_search_end_to_end(tasks: Path, corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        proc = run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch)
        assert proc.returncode == 0, proc.stderr
        assert sim.refused == [] and sim.early_runs == []
        # the store: one, named by the corpus's content; both PDFs uploaded as files for assistants
        (store,) = sim.stores.values()
        assert store["name"].startswith("deskbench-") and store["file_counts"]["completed"] == 2
        assert sorted(f["filename"] for f in sim.files.values()) == ["manual.pdf", "report.pdf"]
        assert all(f["purpose"] == "assistants" for f in sim.files.values())
        # the assistant: the script's request
        (assistant,) = sim.assistants.values()
        assert assistant["name"] == f"DocQA-{store['name']}" and assistant["model"] == "gpt-4o"
        assert assistant["instructions"] == OPENAI_INSTRUCTIONS and assistant["tools"] == [{"type": "file_search"}]
        assert assistant["tool_resources"] == {"file_search": {"vector_store_ids": [store["id"]]}}
        # each question: a thread, the question alone as the user message, a run, the thread deleted
        assert sorted(b["content"] for b in sim.calls("POST", "/threads/") if b and "content" in b) == \
            sorted(t["question"] for t in TASKS)
        assert all(b == {"role": "user", "content": b["content"]} for b in sim.calls("POST", "/threads/") if b and "content" in b)
        assert sim.threads == {} and len(sim.runs) == 3
    eps = episodes(tmp_path / "run")
    assert {k: v[0] for k, v in eps.items()} == {"q1": "ok", "q2": "ok", "q3": "ok"}
    assert eps["q1"][1]["answer"] == ["Rolls-Royce 250-C47B"] and eps["q1"][1]["citations"] == [
        {"document": "manual.pdf", "page": 1}]
    # no JSON: the text is the answer, the annotation's file the citation (no page: dropped, as an import drops it)
    assert eps["q2"][1]["answer"] == ["The harbour authority publishes it."] and eps["q2"][1]["citations"] == []
    assert eps["q2"][3][0]["result"]["annotations"][0]["file"] == "report.pdf"
    # a string answer stays one item; a page that is no number is dropped
    assert eps["q3"][1]["answer"] == ["red"] and eps["q3"][1]["citations"] == []
    # usage and cost: the run's tokens at gpt-4o's price ($2.50 / $10 per million)
    usage = json.loads(sqlite3.connect(tmp_path / "run" / "run.sqlite").execute(
        "SELECT usage FROM episodes WHERE task_id='q1'").fetchone()[0])
    assert usage["input_tokens"] == 1000 and usage["output_tokens"] == 100
    assert usage["cost_usd"] == pytest.approx((1000 * 2.5 + 100 * 10.0) / 1e6)
    # the store is recorded in the corpus folder
    records = json.loads((corpus / "managed_rag" / "stores.json").read_text())["stores"]
    assert [(r["service"], r["id"], sorted(r["files"])) for r in records] == [
        ("openai-file-search", store["id"], ["manual.pdf", "report.pdf"])]


def test_openai_run_scores_as_the_official_predictions_file(tasks: Path, corpus: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        assert run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch).returncode == 0
    # what openai_file_search_agent.py writes for the same replies (run_evaluation's lines): the JSON's
    # answer and citations, else the text and the annotations' files (no page)
    official = [
        {"id": "q1", "question": TASKS[0]["question"], "answer": ["Rolls-Royce 250-C47B"],
         "citations": [{"file": "manual.pdf", "page": 1}], "iterations": 1, "model": "gpt-4o"},
        {"id": "q2", "question": TASKS[1]["question"], "answer": ["The harbour authority publishes it."],
         "citations": [{"file": "report.pdf", "file_id": "file-x"}], "iterations": 1, "model": "gpt-4o"},
        {"id": "q3", "question": TASKS[2]["question"], "answer": "red",
         "citations": [{"file": "manual.pdf", "page": "two"}], "iterations": 1, "model": "gpt-4o"},
    ]
    preds = tmp_path / "official.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in official))
    from_file = scored(str(preds), "--tasks", str(tasks))
    (from_run,) = scored(str(tmp_path / "run")).values()
    assert {k: from_run[k] for k in METRICS} == {k: from_file[k] for k in METRICS}
    # q1 exact; q2's whole sentence against "the harbour authority": ANLS 1 - 14/35 = 0.6 (>= 0.5, correct); q3 wrong
    assert from_run["n"] == 3 and from_run["accuracy"] == pytest.approx(2 / 3)


def test_openai_rerun_reuses_the_store(tasks: Path, corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        assert run_openai(tasks, corpus, tmp_path / "run1", sim, monkeypatch).returncode == 0
        uploads = len(sim.calls("POST", "/files"))
        assert uploads == 2
        assert run_openai(tasks, corpus, tmp_path / "run2", sim, monkeypatch).returncode == 0
        assert len(sim.calls("POST", "/files")) == uploads  # nothing uploaded again
        assert [p for m, p, _ in sim.requests if m == "POST" and p == "/v1/vector_stores"] == ["/v1/vector_stores"]
        assert len(sim.stores) == 1  # no second store
        assert len(sim.assistants) == 1 and sim.refused == []
    # another corpus (other content) gets a store of its own
    other = make_corpus(tmp_path / "other", {"memo.pdf": 1})
    with SimFileSearch(answer=lambda q, files: {"text": "none", "cite": []}) as sim:
        proc = run_openai(tasks, other, tmp_path / "run3", sim, monkeypatch)
        assert proc.returncode == 0, proc.stderr
        names = {s["name"] for s in sim.stores.values()}
    first = json.loads((corpus / "managed_rag" / "stores.json").read_text())["stores"][0]["name"]
    assert names and first not in names


def test_openai_failed_indexing_is_an_episode_error_naming_the_file(tasks: Path, corpus: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer, fail_indexing={"report.pdf"}) as sim:
        proc = run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch)
        assert sim.runs == {}  # no question was asked of a store missing a file
    assert proc.returncode == 0, proc.stderr
    eps = episodes(tmp_path / "run")
    assert {v[0] for v in eps.values()} == {"error"}
    assert all("indexing failed for report.pdf (failed: The file type is not supported.)" in v[2]
               for v in eps.values()), eps


def test_openai_refuses_another_providers_model(tasks: Path, corpus: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    with SimFileSearch(answer=openai_answer) as sim:
        proc = run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch, model="anthropic/claude-sonnet-4-5")
        assert sim.requests == []
    # refused before anything is created: one line, exit 2, no run directory
    assert proc.returncode == 2 and "give e.g. --model openai/gpt-4o" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_sampling_setting_the_script_does_not_send_is_refused(tasks: Path, corpus: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with SimGeminiFileSearch(answer=gemini_answer) as sim:
        for k, v in sim.env().items():
            monkeypatch.setenv(k, v)
        proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus), "--agent", "gemini-file-search",
                       "--model", "google/gemini-2.5-flash", "--temperature", "0.5", "--out", str(tmp_path / "run"),
                       "--json", "--quiet")
        assert sim.requests == []
    assert proc.returncode == 2 and not (tmp_path / "run").exists(), proc.stderr
    assert proc.stderr.strip() == ("error: --agent gemini-file-search sends the official script's request, which "
                                   "sets no --temperature: drop --temperature")


def test_stores_list_and_delete(tasks: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer) as sim:
        assert run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch).returncode == 0
        listed = run_cli("stores", "list", "--corpus", str(corpus), "--json")
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)
        assert row["service"] == "openai-file-search" and row["size_bytes"] == sum(f["bytes"] for f in sim.files.values())
        assert row["storage_usd_per_day"] == pytest.approx(row["size_bytes"] / 1e9 * 0.10)
        deleted = run_cli("stores", "delete", "--corpus", str(corpus))
        assert deleted.returncode == 0, deleted.stderr
        assert sim.stores == {} and sim.assistants == {} and sim.files == {}
        assert json.loads((corpus / "managed_rag" / "stores.json").read_text())["stores"] == []
        again = run_cli("stores", "delete", "--corpus", str(corpus))
        assert again.returncode == 0 and "no managed-RAG store" in again.stdout


# --- Gemini File Search -------------------------------------------------------------------------------
def gemini_answer(prompt: str, files: dict[str, bytes]) -> dict[str, Any]:
    question = prompt.rsplit("\n\nQuestion: ", 1)[1]
    text, cite = REPLIES[question]
    assert set(files) == {"manual.pdf", "report.pdf"} and all(b.startswith(b"%PDF") for b in files.values())
    return {"text": text, "chunks": cite, "queries": [question.lower()],
            "usage": {"promptTokenCount": 2000, "candidatesTokenCount": 50}}


def run_gemini(tasks: Path, corpus: Path, out: Path, sim: SimGeminiFileSearch, monkeypatch: pytest.MonkeyPatch,
               model: str = "google/gemini-2.5-flash") -> Any:
    for k, v in sim.env().items():
        monkeypatch.setenv(k, v)
    return run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus), "--agent", "gemini-file-search",
                   "--model", model, "--out", str(out), "--json", "--quiet")


def test_gemini_file_search_end_to_end(tasks: Path, corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    with SimGeminiFileSearch(answer=gemini_answer, index_polls=2) as sim:
        proc = run_gemini(tasks, corpus, tmp_path / "run", sim, monkeypatch)
        assert proc.returncode == 0, proc.stderr
        assert sim.refused == [] and sim.early_queries == []
        (store,) = sim.stores.values()
        assert store["displayName"].startswith("deskbench-")
        assert sorted(d["displayName"] for d in sim.documents[store["name"]].values()) == ["manual.pdf", "report.pdf"]
        # each question: the script's one user turn (Prompt 6, then the question) and the file_search tool
        bodies = sim.generate_bodies()
        assert len(bodies) == 3
        assert sorted(b["contents"][0]["parts"][0]["text"] for b in bodies) == sorted(
            f"{GEMINI_PROMPT}\n\nQuestion: {t['question']}" for t in TASKS)
        assert all(b["contents"][0]["role"] == "user" and b["tools"] == [
            {"fileSearch": {"fileSearchStoreNames": [store["name"]]}}] for b in bodies)
    eps = episodes(tmp_path / "run")
    assert eps["q1"][0] == "ok" and eps["q1"][1]["answer"] == ["Rolls-Royce 250-C47B"]
    assert eps["q1"][1]["citations"] == [{"document": "manual.pdf", "page": 1}]
    # the citations are the JSON's only: the grounding is recorded, not cited (as the script does)
    assert eps["q2"][1]["citations"] == [] and eps["q2"][3][0]["result"]["grounding_chunks"] == [
        {"uri": None, "title": "report.pdf"}]
    assert eps["q2"][3][0]["result"]["retrieval_queries"] == ["who publishes the annual report?"]
    usage = json.loads(sqlite3.connect(tmp_path / "run" / "run.sqlite").execute(
        "SELECT usage FROM episodes WHERE task_id='q1'").fetchone()[0])
    assert usage["cost_usd"] == pytest.approx((2000 * 0.30 + 50 * 2.50) / 1e6)  # gemini-2.5-flash $0.30 / $2.50


def test_gemini_run_scores_as_the_official_predictions_file(tasks: Path, corpus: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with SimGeminiFileSearch(answer=gemini_answer) as sim:
        assert run_gemini(tasks, corpus, tmp_path / "run", sim, monkeypatch).returncode == 0
    # gemini_file_search_agent.py's lines for the same replies: the JSON's citations, else none
    official = [
        {"id": "q1", "question": TASKS[0]["question"], "answer": ["Rolls-Royce 250-C47B"],
         "citations": [{"file": "manual.pdf", "page": 1}], "iterations": 1, "model": "gemini-2.5-flash"},
        {"id": "q2", "question": TASKS[1]["question"], "answer": ["The harbour authority publishes it."],
         "citations": [], "iterations": 1, "model": "gemini-2.5-flash"},
        {"id": "q3", "question": TASKS[2]["question"], "answer": "red",
         "citations": [{"file": "manual.pdf", "page": "two"}], "iterations": 1, "model": "gemini-2.5-flash"},
    ]
    preds = tmp_path / "official.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in official))
    (from_run,) = scored(str(tmp_path / "run")).values()
    assert {k: from_run[k] for k in METRICS} == {k: scored(str(preds), "--tasks", str(tasks))[k] for k in METRICS}


def test_gemini_rerun_reuses_the_store_and_a_failed_indexing_is_named(tasks: Path, corpus: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with SimGeminiFileSearch(answer=gemini_answer) as sim:
        assert run_gemini(tasks, corpus, tmp_path / "run1", sim, monkeypatch).returncode == 0
        starts = [p for m, p, _, _ in sim.requests if p.endswith(":uploadToFileSearchStore")]
        assert len(starts) == 2
        assert run_gemini(tasks, corpus, tmp_path / "run2", sim, monkeypatch).returncode == 0
        assert [p for m, p, _, _ in sim.requests if p.endswith(":uploadToFileSearchStore")] == starts
        assert len(sim.stores) == 1 and sim.refused == []
    other = make_corpus(tmp_path / "other", {"memo.pdf": 1, "scan.pdf": 1})
    with SimGeminiFileSearch(answer=gemini_answer, fail_indexing={"scan.pdf"}) as sim:
        assert run_gemini(tasks, other, tmp_path / "run3", sim, monkeypatch).returncode == 0
        assert sim.generate_bodies() == []
    eps = episodes(tmp_path / "run3")
    assert all(v[0] == "error" and "indexing failed for scan.pdf (Failed to process scan.pdf" in v[2]
               for v in eps.values()), eps


def test_gemini_stores_delete(tasks: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SimGeminiFileSearch(answer=gemini_answer) as sim:
        assert run_gemini(tasks, corpus, tmp_path / "run", sim, monkeypatch).returncode == 0
        listed = json.loads(run_cli("stores", "list", "gemini-file-search", "--corpus", str(corpus), "--json").stdout)
        assert [(r["service"], r["files"], r["storage_usd_per_day"]) for r in listed] == [("gemini-file-search", 2, 0.0)]
        bad = run_cli("stores", "list", "nope", "--corpus", str(corpus))
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
        assert run_cli("stores", "delete", "--corpus", str(corpus)).returncode == 0
        assert sim.stores == {} and sim.refused == []


# --- the simulators refuse what the APIs refuse -------------------------------------------------------
def test_the_openai_simulator_refuses_what_the_api_refuses() -> None:
    import openai

    with SimFileSearch(answer=openai_answer, max_file_bytes=10) as sim:
        api = openai.OpenAI(base_url=sim.base_url, api_key=sim.api_key, max_retries=0)
        with pytest.raises(openai.NotFoundError, match="No vector store found with id 'vs_nope'"):
            api.vector_stores.retrieve("vs_nope")
        with pytest.raises(openai.BadRequestError, match="Unrecognized request argument supplied: colour"):
            api.vector_stores.create(name="x", extra_body={"colour": "red"})
        with pytest.raises(openai.BadRequestError, match="File is too large"):
            api.files.create(file=("big.pdf", b"%PDF-" + b"x" * 20, "application/pdf"), purpose="assistants")
        with pytest.raises(openai.BadRequestError, match="'nope' is not one of"):
            api.files.create(file=("a.pdf", b"%PDF", "application/pdf"), purpose="nope")  # type: ignore[arg-type]
        store = api.vector_stores.create(name="s")
        with pytest.raises(openai.BadRequestError, match="The requested model 'gpt-nope' does not exist"):
            api.beta.assistants.create(model="gpt-nope", tools=[{"type": "file_search"}])
        with pytest.raises(openai.NotFoundError, match="No vector store found"):
            api.beta.assistants.create(model="gpt-4o", tool_resources={"file_search": {"vector_store_ids": ["vs_x"]}})
        # a file of a type file search does not read is accepted, then fails to index
        bad = api.files.create(file=("notes.xyz", b"abc", "application/octet-stream"), purpose="assistants")
        batch = api.vector_stores.file_batches.create_and_poll(vector_store_id=store.id, file_ids=[bad.id])
        assert batch.file_counts.failed == 1
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=sim.base_url, api_key="sk-wrong", max_retries=0).vector_stores.list()
        assert len(sim.refused) == 7


def test_the_gemini_simulator_refuses_what_the_api_refuses(tmp_path: Path) -> None:
    from deskbench.tracks.docqa.agents.managed_rag.gemini_fs import Api, ApiError, _upload

    with SimGeminiFileSearch(answer=gemini_answer, max_file_bytes=10) as sim:
        api = Api(sim.root, sim.api_key)
        with pytest.raises(ApiError, match="Unknown name \"colour\""):
            api.request("POST", "v1beta/fileSearchStores", {"displayName": "x", "colour": "red"})
        with pytest.raises(ApiError, match="not found") as missing:
            api.request("GET", "v1beta/fileSearchStores/nope")
        assert missing.value.status == 404
        store = api.request("POST", "v1beta/fileSearchStores", {"displayName": "s"})[0]["name"]
        with pytest.raises(ApiError, match="exceeds the maximum"):
            _upload(api, store, "big.pdf", b"%PDF-" + b"x" * 20)
        with pytest.raises(ApiError, match="Unsupported MIME type"):
            api.request("POST", f"upload/v1beta/{store}:uploadToFileSearchStore", {"displayName": "a.bin"},
                        headers={"X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
                                 "X-Goog-Upload-Header-Content-Length": "3",
                                 "X-Goog-Upload-Header-Content-Type": "application/octet-stream"})
        with pytest.raises(ApiError, match="is not found for API version v1beta"):
            api.request("POST", "v1beta/models/gemini-nope:generateContent", {"contents": [{"parts": [{"text": "q"}]}]})
        with pytest.raises(ApiError, match="API key not valid"):
            Api(sim.root, "wrong").request("GET", "v1beta/fileSearchStores")
        _upload(api, store, "a.pdf", b"%PDF-1")
        with pytest.raises(ApiError, match="is not empty") as full:
            api.request("DELETE", f"v1beta/{store}")
        assert full.value.status == 400
        assert len(sim.refused) == 7


def test_retriever_is_refused_the_provider_retrieves(tasks: Path, corpus: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    proc = run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus), "--agent", "openai-file-search",
                   "--model", "openai/gpt-4o", "--retriever", "dense=some/model", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and not (tmp_path / "run").exists()
    assert "--agent openai-file-search never searches (it reads what the provider's store retrieves)" in proc.stderr


def test_openai_upload_refused_is_an_episode_error_naming_the_file(tasks: Path, corpus: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with SimFileSearch(answer=openai_answer, max_file_bytes=10) as sim:  # every PDF is over 10 bytes
        run_openai(tasks, corpus, tmp_path / "run", sim, monkeypatch)
        assert sim.runs == {} and sim.assistants == {}
    eps = episodes(tmp_path / "run")
    assert all(v[0] == "error" and "uploading manual.pdf failed (400 File is too large" in v[2] for v in eps.values()), eps
