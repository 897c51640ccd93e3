"""`m3docrag`: the question's top-k page images by a ColPali-style retriever, sent to the MLLM as
models/qwen.py create_image_message sends them (the images, then the question alone: MDocAgent's
base agent has no system prompt, and M3DocRAG's own generate() sends the same); the pages given
are its citations. Checked on a retriever plugin with fixed pages and a scripted model, through
`deskbench run`, and on tiny ColPali and ColQwen2 models built offline."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pipeline_doubles
import pytest
from conftest import run_cli
from pipeline_doubles import PipelineModel

from deskbench.agents.base import AgentContext, AgentResult, AgentSettings
from deskbench.corpus import Corpus
from deskbench.corpus.images import ImageSpec
from deskbench.models.registry import parse_spec
from deskbench.models.types import ImagePart, Message, TextPart
from deskbench.runs.identity import stored_identities
from deskbench.runs.store import RunStore
from deskbench.search.retriever import open_retriever
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.mdocagent import M3DocRagAgent
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

PINNED = "retriever_plugins:PINNED"
MODEL = "pipeline_doubles:pipeline/fake"
TASK = DocQATask(id="q1", question="Which helicopter accessories are listed?",
                 answer_variants=[["Bell 407"]], evidence=[{"document": "beta.pdf", "page": 2}])


@pytest.fixture(autouse=True)
def _fresh_doubles() -> None:
    pipeline_doubles.REQUESTS.clear()


def corpus_png(corpus: Corpus, doc: str, page: int) -> bytes:
    """A page as MDocAgent's extract_content renders it: 144 dpi, PNG."""
    return corpus.page_image(doc, page, ImageSpec(dpi=144, format="png", max_bytes=5_000_000))


def image_of(corpus: Corpus, doc: str, page: int) -> dict[str, Any]:
    return ImagePart.of(corpus_png(corpus, doc, page)).model_dump(mode="json")


def question() -> dict[str, Any]:
    return TextPart(text=TASK.question).model_dump(mode="json")


def test_top_k_page_images_then_the_question(operator_corpus: Corpus) -> None:
    agent = M3DocRagAgent()
    agent.configure({"image_retriever": f"{PINNED}=beta.pdf:2,alpha.pdf:3,alpha.pdf:1"})
    ctx = AgentContext(model=PipelineModel(parse_spec(MODEL)), corpus=operator_corpus, settings=AgentSettings(top_k=2))
    result: AgentResult = asyncio.run(agent.run(TASK, ctx))
    (request,) = pipeline_doubles.REQUESTS
    pages = [ImagePart.of(corpus_png(operator_corpus, d, p)) for d, p in (("beta.pdf", 2), ("alpha.pdf", 3))]
    expected = Message(role="user", content=[*pages, TextPart(text=TASK.question)])
    assert [m.model_dump(mode="json") for m in request.messages] == [expected.model_dump(mode="json")]
    assert request.response_schema is None  # free text, as the pipeline generates
    assert result.status == "ok"
    sub = result.submission
    assert isinstance(sub, DocQASubmission)
    assert sub.answer == ["2 page images"] and sub.answer_form == "string"  # the model's reply, as given
    assert [(c.document, c.page) for c in sub.citations] == [("beta.pdf", 2), ("alpha.pdf", 3)]
    (search,) = [s for s in result.trajectory if isinstance(s, ToolCallStep)]
    assert search.name == "image_retrieval" and search.result["pages"] == [["beta.pdf", 2], ["alpha.pdf", 3],
                                                                             ["alpha.pdf", 1]]


def _run(corpus: Corpus, tmp_path: Path, *extra: str) -> Any:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(TASK.model_dump_json() + "\n")
    return run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus.root), "--agent", "m3docrag", "--model", MODEL,
                   "--out", str(tmp_path / "run"), "--json", "--quiet", *extra)


def test_m3docrag_runs_end_to_end_with_one_page_by_default(operator_corpus: Corpus, tmp_path: Path) -> None:
    proc = _run(operator_corpus, tmp_path, "--image-retriever", f"{PINNED}=beta.pdf:2,alpha.pdf:1")
    assert proc.returncode == 0, proc.stderr
    store = RunStore(tmp_path / "run", create=False)
    (system,) = stored_identities(store)
    config = stored_identities(store)[system].config
    assert config.settings["top_k"] == 1  # MDocAgent's config/base.yaml dataset.top_k
    assert config.settings["image_retriever"] == {"kind": "pinned", "model": "beta.pdf:2,alpha.pdf:1",
                                                  "pages": [["beta.pdf", 2], ["alpha.pdf", 1]]}
    assert "text_retriever" not in config.settings and config.settings["view"] == "image"
    (episode,) = store.episodes(system)
    sub = DocQASubmission.model_validate(episode.submission)
    assert sub.answer == ["1 page images"] and [(c.document, c.page) for c in sub.citations] == [("beta.pdf", 2)]
    (request,) = pipeline_doubles.REQUESTS
    assert [m.model_dump(mode="json") for m in request.messages][0]["content"] == [
        image_of(operator_corpus, "beta.pdf", 2), question()]
    assert run_cli("score", str(tmp_path / "run"), "--json").returncode == 0


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tiny_vision_encoders import write_tiny_colpali, write_tiny_colqwen2

    root = tmp_path_factory.mktemp("models")
    return {"colpali": write_tiny_colpali(root / "colpali"), "colqwen": write_tiny_colqwen2(root / "colqwen")}


@pytest.mark.parametrize("kind", ["colpali", "colqwen"])
def test_m3docrag_on_a_tiny_late_interaction_model(kind: str, models: dict[str, Path], operator_corpus: Corpus,
                                                   tmp_path: Path) -> None:
    spec = f"{kind}={models[kind]}"
    proc = _run(operator_corpus, tmp_path, "--image-retriever", spec, "-k", "2")
    assert proc.returncode == 0, proc.stderr
    ranked = open_retriever(spec, operator_corpus).search(TASK.question, 10)  # the model's own ranking
    assert len(ranked) == 5  # every page of the corpus
    store = RunStore(tmp_path / "run", create=False)
    (system,) = stored_identities(store)
    assert stored_identities(store)[system].config.settings["image_retriever"]["kind"] == kind
    (episode,) = store.episodes(system)
    (search,) = [s for s in episode.trajectory if isinstance(s, ToolCallStep)]
    assert search.result["pages"] == [[h.document, h.page] for h in ranked]
    best = [(h.document, h.page) for h in ranked[:2]]
    (request,) = pipeline_doubles.REQUESTS
    assert [m.model_dump(mode="json") for m in request.messages][0]["content"] == [
        *(image_of(operator_corpus, d, p) for d, p in best), question()]
    sub = DocQASubmission.model_validate(episode.submission)
    assert [(c.document, c.page) for c in sub.citations] == best
