"""What the three pipelines of MDocAgent's repository share (github aiming-lab/MDocAgent at df34e4c,
which MADQA's Table 3 follows for MDocAgent, M3DocRAG and ColBERTv2 + Llama-3.1-8B).

- Retrieval (scripts/retrieve.py): the question as written, one retrieval per modality (text:
  ColBERTv2 over page texts, retrieval/text_retrieval.py; image: ColPali over page images,
  retrieval/image_retrieval.py), each keeping its top 10 pages (config/retrieval/base.yaml
  top_k), of which the agents are given the first `dataset.top_k` (config/base.yaml: 1; the
  README's example passes 4). Here each retrieval runs through deskbench's retriever interface
  (search/retriever.py) over the whole corpus, and is recorded as a search step (its 10 pages),
  so the retrieval metrics read it. MDocAgent retrieves within a question's own document; a
  MADQA corpus is searched as one collection, as MADQA ran it.
- Pages as the agents read them (mydatasets/base_dataset.py): a page's text with line breaks
  turned to spaces, at most 100,000 characters (config/dataset/base.yaml max_character_per_page);
  a page's image rendered at 144 dpi (extract_content(resolution=144)), as PNG. No file name or
  page number is shown to the model.
- Messages (models/*.py): a Qwen2-VL agent (image, general, summarising) gets one user message
  per modality it reads, each the pages then the question (BaseModel.process_message: texts,
  then images, then the question alone when both are empty); a Llama agent (text) gets one
  user message: each page's text and a line break, a line break, then the question.
- Citations: the original pipelines output an answer only. MADQA scores Page F1 on citations,
  so the citations are the pages the pipeline gave its model (the retrieved top-k of each
  modality, text before image, each page once): never a page the pipeline did not retrieve.
- One `--model` answers for every agent (the repository pairs Qwen2-VL-7B with Llama-3.1-8B for
  the text agent); its message shapes are kept per agent as above.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from deskbench.agents.base import AgentContext, AnswerArgs, Recorder
from deskbench.corpus.images import ImageSpec
from deskbench.errors import UserError
from deskbench.models.types import ChatRequest, ImagePart, Message, Part, TextPart
from deskbench.tasks.trajectory import Citation, ModelCallStep, ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.untrusted.limits import FileLimitError

if TYPE_CHECKING:
    from pathlib import Path

    from deskbench.agents.base import AgentResult
    from deskbench.corpus import Corpus
    from deskbench.search.retriever import Retriever
    from deskbench.tracks.docqa.tasks import DocQATask

Modality = Literal["text", "image"]
Page = tuple[str, int]

SOURCE = "github aiming-lab/MDocAgent df34e4c25fcba74b7bbb93dd5d4c9ef3c521d341"

DEFAULT_RETRIEVERS: dict[Modality, str] = {
    "text": "colbert=colbert-ir/colbertv2.0",  # retrieval/text_retrieval.py: RAGatouille's colbert-ir/colbertv2.0
    # retrieval/image_retrieval.py loads vidore/colpali (v1.0, a PEFT adapter over colpaligemma-3b-mix-448-base):
    # the same checkpoint, merged into its base on first use (search/embedded/convert.py)
    "image": "colpali=vidore/colpali",
}
OPTION: dict[Modality, str] = {"text": "text_retriever", "image": "image_retriever"}
FLAG: dict[Modality, str] = {"text": "--text-retriever", "image": "--image-retriever"}

RETRIEVAL_DEPTH = 10
"""config/retrieval/base.yaml top_k: the pages each retrieval keeps (and a search step records)."""

TOP_K = 1
"""config/base.yaml dataset.top_k: the pages of each retrieval the agents are given (-k changes it)."""

IMAGE_DPI = 144  # mydatasets/base_dataset.py extract_content(resolution=144)
MAX_CHARACTERS = 100_000  # config/dataset/base.yaml max_character_per_page


def identity() -> dict[str, object]:
    """The pipelines' fixed settings, for the run's configuration (the retrievers and k are
    recorded apart; --dpi and --view do not apply: pages are shown as MDocAgent shows them)."""
    return {"source": SOURCE, "retrieval_depth": RETRIEVAL_DEPTH, "image_dpi": IMAGE_DPI, "image_format": "png",
            "max_characters_per_page": MAX_CHARACTERS, "citations": "the pages given to the model"}


def retriever_options(agent: str, modalities: Sequence[Modality], given: Mapping[Modality, str | None]) -> dict[str, str]:
    """The agent options of a pipeline agent: its retriever specs, the paper's where not given; a
    flag for a modality the agent does not retrieve is refused."""
    from deskbench.search.retriever_use import check_spec

    options: dict[str, str] = {}
    for modality, spec in given.items():
        if spec is not None and modality not in modalities:
            raise UserError(f"{FLAG[modality]}: --agent {agent} retrieves no {modality}s; drop {FLAG[modality]} "
                            f"(it takes {', '.join(FLAG[m] for m in modalities)})")
    for modality in modalities:
        spec = given.get(modality) or DEFAULT_RETRIEVERS[modality]
        options[OPTION[modality]] = str(check_spec(spec, FLAG[modality]))
    return options


class PipelineAgent:
    """A fixed pipeline over retrievers of its own (one per modality it reads), opened once per run
    before the run directory is made (tracks/docqa/run.py prepare), their identities recorded."""

    name: str
    modalities: tuple[Modality, ...]

    def __init__(self) -> None:
        self.specs: dict[Modality, str] = {m: DEFAULT_RETRIEVERS[m] for m in self.modalities}
        self._opened: dict[Modality, Retriever] = {}
        self._corpus: Path | None = None
        self._lock = threading.Lock()

    def configure(self, options: Mapping[str, object]) -> None:
        """Its retriever specs from the run's agent options (`text_retriever`, `image_retriever`)."""
        both: tuple[Modality, ...] = ("text", "image")
        given = {m: options.get(OPTION[m]) for m in both}
        for modality, value in given.items():
            if value is not None and not isinstance(value, str):
                raise UserError(f"{FLAG[modality]} {value!r}: give a retriever spec such as "
                                f"{DEFAULT_RETRIEVERS[modality]}")
        chosen = retriever_options(self.name, self.modalities, {m: v for m, v in given.items() if isinstance(v, str)})
        specs = {m: chosen[OPTION[m]] for m in self.modalities}
        if specs != self.specs:
            self.specs, self._opened = specs, {}

    def open_retrievers(self, corpus: Corpus, *, allow_download: bool = False) -> dict[str, object]:
        """Open (building their indexes when the corpus has none yet) the retrievers; their
        identities by option name, for the run's configuration."""
        from deskbench.console import err
        from deskbench.search.retriever_use import describe

        with self._lock:
            if self._corpus != corpus.root:
                self._opened, self._corpus = {}, corpus.root
            for modality in self.modalities:
                if modality not in self._opened:
                    err.print(f"{self.name}: {modality} retriever {self.specs[modality]}: opening over {corpus.root} ...",
                              markup=False, highlight=False)
                    self._opened[modality] = self._open(modality, corpus, allow_download)
                    err.print(f"{self.name}: {modality} retriever ready: "
                              f"{describe(self._opened[modality].identity())}", markup=False, highlight=False)
            return {OPTION[m]: self._opened[m].identity() for m in self.modalities}

    def _open(self, modality: Modality, corpus: Corpus, allow_download: bool) -> Retriever:
        """One retriever; its kind's one-line error names this agent's flag, not --retriever."""
        from deskbench.search.retriever import open_retriever

        spec = self.specs[modality]
        try:
            return open_retriever(spec, corpus, allow_download=allow_download)
        except UserError as exc:
            default = f" ({self.name}'s default; {FLAG[modality]} chooses another)" if spec == DEFAULT_RETRIEVERS[modality] else ""
            raise UserError(str(exc).replace(f"--retriever {spec}", f"{FLAG[modality]} {spec}{default}", 1)) from None
        except ImportError as exc:  # torch / transformers absent: the embedding kinds need the retrieval extra
            raise UserError(f"{FLAG[modality]} {spec}: {exc}; install the retrieval extra: "
                            "pip install 'deskbench[retrieval]'") from None

    async def retrieve(self, ctx: AgentContext, rec: Recorder, modality: Modality, question: str) -> list[Page]:
        """One retrieval of the question (RETRIEVAL_DEPTH pages, recorded as a search step); the
        first top-k pages, which the agents are given."""
        assert ctx.corpus is not None, f"{self.name} needs a corpus"
        if modality not in self._opened or self._corpus != ctx.corpus.root:  # not opened by prepare (a direct use)
            await asyncio.to_thread(self.open_retrievers, ctx.corpus)
        retriever = self._opened[modality]
        depth = max(RETRIEVAL_DEPTH, ctx.settings.top_k)
        hits = await asyncio.to_thread(retriever.search, question, depth)
        pages = [(h.document, h.page) for h in hits]
        rec.add(ToolCallStep(name=f"{modality}_retrieval", arguments={"query": question, "retriever": self.specs[modality]},
                             result={"pages": [list(p) for p in pages]}),
                detail={"hits": [{"file": h.document, "page": h.page, "score": h.score} for h in hits]})
        return pages[:ctx.settings.top_k]


# -- the pages as the agents read them -------------------------------------------------------


async def page_texts(ctx: AgentContext, pages: Sequence[Page]) -> list[str]:
    """load_txt: line breaks to spaces, at most MAX_CHARACTERS characters."""
    assert ctx.corpus is not None
    texts = await asyncio.to_thread(ctx.corpus.page_texts, list(pages)) if pages else []
    return [t.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")[:MAX_CHARACTERS] for t in texts]


def _load_images(ctx: AgentContext, pages: Sequence[Page]) -> list[Part]:
    assert ctx.corpus is not None
    spec = ImageSpec(dpi=IMAGE_DPI, format="png", max_bytes=ctx.settings.max_image_bytes)
    parts: list[Part] = []
    for doc, page in pages:
        try:
            parts.append(ImagePart.of(ctx.corpus.page_image(doc, page, spec), "image/png", ref=f"page:{doc}#{page}@{IMAGE_DPI}"))
        except FileLimitError as exc:  # a hostile page: the model is told, the episode goes on
            parts.append(TextPart(text=f"[page image not shown: {exc}]"))
    return parts


async def page_images(ctx: AgentContext, pages: Sequence[Page]) -> list[Part]:
    return await asyncio.to_thread(_load_images, ctx, pages)


# -- messages as models/qwen.py and models/llama.py build them -------------------------------


def qwen_messages(question: str, texts: Sequence[str] | None, images: Sequence[Part] | None) -> list[Message]:
    """BaseModel.process_message with Qwen2VL's message builders: a user message of the texts then
    the question, one of the images then the question, and the question alone when both are empty."""
    messages: list[Message] = []
    if texts is not None:
        messages.append(Message(role="user", content=[*(TextPart(text=t) for t in texts), TextPart(text=question)]))
    if images is not None:
        messages.append(Message(role="user", content=[*images, TextPart(text=question)]))
    if not texts and not images:
        messages.append(Message(role="user", content=[TextPart(text=question)]))
    return messages


def llama_messages(question: str, texts: Sequence[str] | None) -> list[Message]:
    """BaseModel.process_message with Llama3's: each text and a line break, a line break, the question."""
    messages: list[Message] = []
    if texts is not None:
        messages.append(Message(role="user", content="".join(t + "\n" for t in texts) + "\n" + question))
    if not texts:
        messages.append(Message(role="user", content=question))
    return messages


async def ask(rec: Recorder, messages: list[Message]) -> tuple[str, list[Message]]:
    """One generation (free text, as the pipelines generate); the reply and the conversation with it."""
    response = await rec.complete(ChatRequest(messages=messages))
    reply = response.message.text()
    return reply, [*messages, Message(role="assistant", content=reply)]


# -- the answer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A pipeline's final answer and the pages it was given (its citations)."""

    text: Any  # None when the summariser's JSON had no "Answer" (the original records null)
    pages: Sequence[Page]


def cited(*groups: Sequence[Page]) -> list[Page]:
    """The pages given to the model, each once, in the order given."""
    return list(dict.fromkeys(p for group in groups for p in group))


def finish(task: DocQATask, rec: Recorder, answer: Answer, searches: Sequence[str]) -> AgentResult:
    """The submission: a string answer as one item (answer_form "string", as the pipelines give
    it), a list item by item; the pages given to the model as its citations; the retrievals'
    queries as its search history and its model calls as its steps (a fixed pipeline's effort)."""
    value = answer.text
    if value is None:
        return rec.result("error", error='no answer: the summarising agent\'s JSON has no "Answer"')
    items = value if isinstance(value, list) else [value]
    texts = [t.strip() for t in (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in items)]
    if not any(texts):
        return rec.result("error", error="no answer: the model's reply is empty")
    args = AnswerArgs(answer=[t for t in texts if t],
                      citations=[Citation(document=doc, page=page) for doc, page in answer.pages])
    calls = sum(1 for step in rec.trajectory if isinstance(step, ModelCallStep))
    return rec.result("ok", submission_of(task, args, steps=calls, llm_calls=calls, search_history=list(searches),
                                          answer_form="list" if isinstance(value, list) else "string"))
