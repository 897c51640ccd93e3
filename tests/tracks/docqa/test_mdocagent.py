"""`mdocagent` and `colbert-llm`: MDocAgent's repository's pipelines (github aiming-lab/MDocAgent
df34e4c; agents/mdoc_agent.py, multi_agent_system.py, models/qwen.py and llama.py), each request
checked against the messages the original builds, written out by hand here; the Critical agent's
clues and the Summarising agent's answer read as the original reads them; the run end to end
through `deskbench run` (retrievers by module path, a scripted model plugin), and on tiny
ColBERT and ColPali models built offline.

The prompts are fixed by their sha256 as taken from the repository's config/agent/*.yaml
(tests/data/mdocagent_prompts.json; the repository is not read here)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pipeline_doubles
import pytest
from conftest import run_cli
from pipeline_doubles import CRITICAL_REPLY, PipelineModel

from deskbench.agents.base import AgentContext, AgentResult, AgentSettings
from deskbench.corpus import Corpus
from deskbench.corpus.images import ImageSpec
from deskbench.errors import UserError
from deskbench.models.registry import parse_spec
from deskbench.models.types import ImagePart, Message, Part, TextPart
from deskbench.runs.identity import stored_identities
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.mdocagent import ColbertLlmAgent, MDocAgent, prompts
from deskbench.tracks.docqa.agents.mdocagent.mdocagent import clues, final_answer
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask

PINNED = "retriever_plugins:PINNED"
NOTHING = "pipeline_doubles:NOTHING"
MODEL = "pipeline_doubles:pipeline/fake"
DATA = Path(__file__).resolve().parents[2] / "data" / "mdocagent_prompts.json"
TASK = DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                 answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}])
Q = TASK.question
JOINT = "\nYou may use the given clue:\n"


@pytest.fixture(autouse=True)
def _fresh_doubles() -> None:
    pipeline_doubles.REQUESTS.clear()
    pipeline_doubles.SUMMARY.clear()


def context(corpus: Corpus, top_k: int = 1) -> AgentContext:
    return AgentContext(model=PipelineModel(parse_spec(MODEL)), corpus=corpus, settings=AgentSettings(top_k=top_k))


def run(agent: Any, corpus: Corpus, top_k: int = 1, **options: str) -> AgentResult:
    agent.configure(options)
    result: AgentResult = asyncio.run(agent.run(TASK, context(corpus, top_k)))
    return result


def text_of(corpus: Corpus, doc: str, page: int) -> str:
    """A page's text as mydatasets/base_dataset.py load_txt gives it: line breaks to spaces."""
    return corpus.page_texts([(doc, page)])[0].replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def image_of(corpus: Corpus, doc: str, page: int) -> ImagePart:
    """A page as extract_content renders it: 144 dpi, PNG."""
    return ImagePart.of(corpus.page_image(doc, page, ImageSpec(dpi=144, format="png", max_bytes=5_000_000)))


def user(*parts: Part | str) -> Message:
    return Message(role="user", content=[TextPart(text=p) if isinstance(p, str) else p for p in parts])


def sent(i: int) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in pipeline_doubles.REQUESTS[i].messages]


def dumped(*messages: Message) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


def test_prompts_are_the_repositorys() -> None:
    recorded = json.loads(DATA.read_text(encoding="utf-8"))
    ours = {name: hashlib.sha256(getattr(prompts, name).encode()).hexdigest() for name in recorded["sha256"]}
    assert ours == recorded["sha256"]
    assert prompts.GENERAL_SYSTEM.endswith("Question: \n") and prompts.TEXT_SYSTEM.endswith("Question: ")
    assert prompts.CLUE_JOINT == JOINT and prompts.BASE_SYSTEM == ""


def test_mdocagent_asks_its_five_agents_as_mdoc_agent_py_does(operator_corpus: Corpus) -> None:
    result = run(MDocAgent(), operator_corpus, text_retriever=f"{PINNED}=alpha.pdf:1,beta.pdf:1",
                 image_retriever=f"{PINNED}=beta.pdf:2,alpha.pdf:2")
    text, image = text_of(operator_corpus, "alpha.pdf", 1), image_of(operator_corpus, "beta.pdf", 2)
    assert "Mountain car" in text and "\n" not in text
    assert len(pipeline_doubles.REQUESTS) == 5
    general = [user(text, prompts.GENERAL_SYSTEM + Q), user(image, prompts.GENERAL_SYSTEM + Q)]
    assert sent(0) == dumped(*general)  # a message of the texts, one of the images, each with the question
    assert sent(1) == dumped(*general, Message(role="assistant", content="Mountain car"),
                             user(prompts.CRITICAL_PROMPT))  # the Critical prompt in the General agent's conversation
    assert sent(2) == dumped(Message(role="user", content=text + "\n" + "\n" + prompts.TEXT_SYSTEM + Q + JOINT
                                     + "winter rental rates"))  # Llama's shape, the text clue
    assert sent(3) == dumped(user(image, prompts.IMAGE_SYSTEM + Q + JOINT + "the rates table"))
    assert sent(4) == dumped(user(prompts.SUM_SYSTEM + "General Agent:\nMountain car\nText Agent:\nMountain car\n"
                                  "Image Agent:\n1 page images\n"))
    assert result.status == "ok", result.error
    sub = result.submission
    assert isinstance(sub, DocQASubmission)
    assert sub.answer == ["Mountain car"] and sub.answer_form == "string"
    # the pages the agents were given, text's then image's: never one the pipeline did not retrieve
    assert [(c.document, c.page) for c in sub.citations] == [("alpha.pdf", 1), ("beta.pdf", 2)]
    assert sub.steps == 5 and sub.search_history == [Q, Q]
    searches = [s for s in result.trajectory if isinstance(s, ToolCallStep)]
    assert [(s.name, s.arguments["query"], s.result["pages"]) for s in searches] == [
        ("text_retrieval", Q, [["alpha.pdf", 1], ["beta.pdf", 1]]),  # all it retrieved, for the retrieval metrics
        ("image_retrieval", Q, [["beta.pdf", 2], ["alpha.pdf", 2]])]


def test_top_k_pages_of_each_retrieval(operator_corpus: Corpus) -> None:
    result = run(MDocAgent(), operator_corpus, top_k=2, text_retriever=f"{PINNED}=alpha.pdf:2,alpha.pdf:1,beta.pdf:1",
                 image_retriever=f"{PINNED}=alpha.pdf:2,beta.pdf:2")
    texts = [text_of(operator_corpus, "alpha.pdf", p) for p in (2, 1)]
    images = [image_of(operator_corpus, d, p) for d, p in (("alpha.pdf", 2), ("beta.pdf", 2))]
    assert sent(0)[0] == dumped(user(*texts, prompts.GENERAL_SYSTEM + Q))[0]
    assert sent(2) == dumped(Message(role="user", content=texts[0] + "\n" + texts[1] + "\n" + "\n" + prompts.TEXT_SYSTEM
                                     + Q + JOINT + "winter rental rates"))
    assert sent(3) == dumped(user(*images, prompts.IMAGE_SYSTEM + Q + JOINT + "the rates table"))
    assert isinstance(result.submission, DocQASubmission)
    assert [(c.document, c.page) for c in result.submission.citations] == [
        ("alpha.pdf", 2), ("alpha.pdf", 1), ("beta.pdf", 2)]  # alpha.pdf 2 given twice, cited once


def test_nothing_retrieved_sends_the_question_alone_as_process_message_does(operator_corpus: Corpus) -> None:
    result = run(MDocAgent(), operator_corpus, text_retriever=NOTHING, image_retriever=NOTHING)
    g = prompts.GENERAL_SYSTEM + Q
    assert sent(0) == dumped(user(g), user(g), user(g))  # empty texts, empty images, then the question alone
    t = prompts.TEXT_SYSTEM + Q + JOINT + "winter rental rates"
    assert sent(2) == dumped(Message(role="user", content="\n" + t), Message(role="user", content=t))
    i = prompts.IMAGE_SYSTEM + Q + JOINT + "the rates table"
    assert sent(3) == dumped(user(i), user(i))
    assert isinstance(result.submission, DocQASubmission) and result.submission.citations == []


@pytest.mark.parametrize(("reply", "expected"), [
    (CRITICAL_REPLY, ("winter rental rates", "the rates table")),
    ('{"text": "only text"}', ("only text", "")),
    ('{"text": {"nested": 1}, "image": "x"}', ("", "")),  # cut at the first "}": not JSON, both empty
    ('{"image": ["a", "b"]}', ("", '["a", "b"]')),  # a clue that is not text is joined as JSON
    ("no dictionary at all", ("", "")),
    ("} before {", ("", "")),
])
def test_critical_clues_read_as_mdoc_agent_py_reads_them(reply: str, expected: tuple[str, str]) -> None:
    assert clues(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"Answer": "Mountain car"}', "Mountain car"),
    ('{"Answer": ["a", 3]}', ["a", 3]),
    ('{"answer": "lower case"}', None),  # JSON without "Answer": the original records null
    ('["a list"]', '["a list"]'),  # JSON without .get: the reply itself
    ("The answer is 4.", "The answer is 4."),
])
def test_final_answer_read_as_extract_final_answer_reads_it(reply: str, expected: object) -> None:
    assert final_answer(reply) == expected


@pytest.mark.parametrize(("summary", "status", "answer", "form"), [
    ('{"Answer": ["a", 3]}', "ok", ["a", "3"], "list"),
    ("Plain words.", "ok", ["Plain words."], "string"),
    ('{"answer": "x"}', "error", None, None),
    ('{"Answer": "  "}', "error", None, None),
])
def test_the_summarisers_answer_becomes_the_submission(summary: str, status: str, answer: list[str] | None,
                                                       form: str | None, operator_corpus: Corpus) -> None:
    pipeline_doubles.SUMMARY.append(summary)
    result = run(MDocAgent(), operator_corpus, text_retriever=f"{PINNED}=alpha.pdf:1", image_retriever=f"{PINNED}=beta.pdf:2")
    assert result.status == status
    if status == "ok":
        assert isinstance(result.submission, DocQASubmission)
        assert (result.submission.answer, result.submission.answer_form) == (answer, form)
    else:
        assert result.error is not None and result.error.startswith("no answer")


def test_colbert_llm_sends_page_texts_then_the_question(operator_corpus: Corpus) -> None:
    result = run(ColbertLlmAgent(), operator_corpus, top_k=2, text_retriever=f"{PINNED}=beta.pdf:1,alpha.pdf:1,beta.pdf:2")
    texts = [text_of(operator_corpus, d, p) for d, p in (("beta.pdf", 1), ("alpha.pdf", 1))]
    assert len(pipeline_doubles.REQUESTS) == 1
    assert sent(0) == dumped(Message(role="user", content=texts[0] + "\n" + texts[1] + "\n" + "\n" + Q))
    assert isinstance(result.submission, DocQASubmission)
    assert result.submission.answer == ["Mountain car"]
    assert [(c.document, c.page) for c in result.submission.citations] == [("beta.pdf", 1), ("alpha.pdf", 1)]


def test_an_agent_refuses_the_other_modalitys_retriever() -> None:
    with pytest.raises(UserError, match=r"--image-retriever: --agent colbert-llm retrieves no images"):
        ColbertLlmAgent().configure({"image_retriever": "colpali=x/y"})
    with pytest.raises(UserError, match=r"--text-retriever 'colbert=': 'colbert=' is not KIND or KIND=MODEL"):
        MDocAgent().configure({"text_retriever": "colbert="})
    agent = MDocAgent()
    agent.configure({})
    assert agent.specs == {"text": "colbert=colbert-ir/colbertv2.0", "image": "colpali=vidore/colpali"}


# -- end to end: deskbench run ---------------------------------------------------------------


def _tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(TASK.model_dump_json() + "\n")
    return path


def _run(corpus: Corpus, tmp_path: Path, agent: str, *extra: str, env: dict[str, str] | None = None) -> Any:
    return run_cli("run", "--tasks", str(_tasks(tmp_path)), "--corpus", str(corpus.root), "--agent", agent,
                   "--model", MODEL, "--out", str(tmp_path / "run"), "--json", "--quiet", *extra, env=env)


def test_mdocagent_runs_end_to_end_and_records_its_retrievers(operator_corpus: Corpus, tmp_path: Path) -> None:
    proc = _run(operator_corpus, tmp_path, "mdocagent", "--text-retriever", f"{PINNED}=alpha.pdf:1",
                "--image-retriever", f"{PINNED}=beta.pdf:2")
    assert proc.returncode == 0, proc.stderr
    store = RunStore(tmp_path / "run", create=False)
    (system,) = stored_identities(store)
    config = stored_identities(store)[system].config
    assert config.agent == "mdocagent" and config.settings["top_k"] == 1  # config/base.yaml dataset.top_k
    assert config.settings["text_retriever"] == {"kind": "pinned", "model": "alpha.pdf:1", "pages": [["alpha.pdf", 1]]}
    assert config.settings["image_retriever"] == {"kind": "pinned", "model": "beta.pdf:2", "pages": [["beta.pdf", 2]]}
    assert "retriever" not in config.settings  # the run's own --retriever (bm25) is not what it searched with
    assert config.settings["view"] == "text+image" and "dpi" not in config.settings  # pages as MDocAgent shows them
    assert config.settings["mdocagent"] == {
        "source": "github aiming-lab/MDocAgent df34e4c25fcba74b7bbb93dd5d4c9ef3c521d341", "retrieval_depth": 10,
        "image_dpi": 144, "image_format": "png", "max_characters_per_page": 100_000,
        "citations": "the pages given to the model"}
    (episode,) = store.episodes(system)
    assert episode.status == "ok"
    sub = DocQASubmission.model_validate(episode.submission)
    assert sub.answer == ["Mountain car"] and [(c.document, c.page) for c in sub.citations] == [
        ("alpha.pdf", 1), ("beta.pdf", 2)]
    scored = run_cli("score", str(tmp_path / "run"), "--json")
    assert scored.returncode == 0, scored.stderr
    assert '"accuracy"' in scored.stdout


@pytest.mark.parametrize(("agent", "extra", "says"), [
    ("mdocagent", ("--retriever", f"{PINNED}=alpha.pdf:1"),
     "--agent mdocagent retrieves with its own retrievers; give --text-retriever / --image-retriever instead"),
    ("colbert-llm", ("--image-retriever", f"{PINNED}=alpha.pdf:1"), "--agent colbert-llm retrieves no images"),
    ("bm25-agent", ("--text-retriever", f"{PINNED}=alpha.pdf:1"), "--agent bm25-agent has no retrievers of its own"),
    ("mdocagent", ("--text-retriever", f"{PINNED}=nowhere.pdf:1"), "'nowhere.pdf:1' is not a page of the corpus"),
])
def test_a_retriever_mistake_is_one_line_before_the_run_directory(agent: str, extra: tuple[str, ...], says: str,
                                                                  operator_corpus: Corpus, tmp_path: Path) -> None:
    proc = _run(operator_corpus, tmp_path, agent, *extra)
    assert proc.returncode == 2
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_the_papers_model_missing_is_one_line_naming_the_flag(operator_corpus: Corpus, tmp_path: Path) -> None:
    proc = _run(operator_corpus, tmp_path, "colbert-llm", env={"HF_HUB_CACHE": str(tmp_path / "empty-cache"),
                                                                "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "--text-retriever colbert=colbert-ir/colbertv2.0 (colbert-llm's default; --text-retriever chooses " \
           "another)" in line and "huggingface-cli download colbert-ir/colbertv2.0" in line
    assert not (tmp_path / "run").exists()


def test_a_missing_library_is_one_line_naming_the_extra(operator_corpus: Corpus, tmp_path: Path) -> None:
    proc = _run(operator_corpus, tmp_path, "colbert-llm", "--text-retriever", "pipeline_doubles:TORCHLESS")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("--text-retriever pipeline_doubles:TORCHLESS: No module named 'torch'; install the retrieval extra: "
            "pip install 'deskbench[retrieval]'") in proc.stderr
    assert not (tmp_path / "run").exists()


# -- end to end on tiny models built offline ---------------------------------------------------


@pytest.fixture(scope="module")
def colbert_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_text_encoders import write_colbert

    return write_colbert(tmp_path_factory.mktemp("models") / "colbert", seed=3)


@pytest.fixture(scope="module")
def colpali_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_vision_encoders import write_tiny_colpali

    return write_tiny_colpali(tmp_path_factory.mktemp("models") / "colpali")


def test_mdocagent_on_tiny_colbert_and_colpali(operator_corpus: Corpus, colbert_model: Path, colpali_model: Path,
                                              tmp_path: Path) -> None:
    from deskbench.search.retriever import open_retriever

    text_spec, image_spec = f"colbert={colbert_model}", f"colpali={colpali_model}"
    proc = _run(operator_corpus, tmp_path, "mdocagent", "--text-retriever", text_spec, "--image-retriever", image_spec)
    assert proc.returncode == 0, proc.stderr
    store = RunStore(tmp_path / "run", create=False)
    (system,) = stored_identities(store)
    config = stored_identities(store)[system].config
    assert config.settings["text_retriever"]["kind"] == "colbert"
    assert config.settings["image_retriever"]["kind"] == "colpali"
    # each retrieval ranked the corpus as the model itself ranks it, and the agents got its best page
    text_best = open_retriever(text_spec, operator_corpus).search(Q, 10)
    image_best = open_retriever(image_spec, operator_corpus).search(Q, 10)
    (episode,) = store.episodes(system)
    searches = [s for s in episode.trajectory if isinstance(s, ToolCallStep)]
    assert [s.result["pages"] for s in searches] == [[[h.document, h.page] for h in text_best],
                                                     [[h.document, h.page] for h in image_best]]
    assert len(text_best) == 5 == len(image_best)  # every page of the corpus, best first
    t, i = (text_best[0].document, text_best[0].page), (image_best[0].document, image_best[0].page)
    assert sent(2)[0]["content"].startswith(text_of(operator_corpus, *t) + "\n\n")
    assert sent(3)[0]["content"][0] == image_of(operator_corpus, *i).model_dump(mode="json")
    sub = DocQASubmission.model_validate(episode.submission)
    assert [(c.document, c.page) for c in sub.citations] == list(dict.fromkeys([t, i]))
