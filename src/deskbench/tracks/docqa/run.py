"""docqa's side of a run: one system (agent x model) over a task list into a run directory, what
`deskbench run` and `deskbench demo` both do. Validates the settings, builds the model inside its
retry/cache/usage wrapper (which checks its key and settings), opens the store and hands the one
runner (runs/track.py execute_run) a PreparedRun."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from deskbench.agents.base import VIEWS, AgentContext, AgentResult, AgentSettings, View
from deskbench.corpus import Corpus
from deskbench.errors import UserError, one_of
from deskbench.models.registry import open_model
from deskbench.models.settings import ResolvedSettings, Sampling
from deskbench.paths import require_corpus
from deskbench.requirements import check_agent
from deskbench.runs.identity import (
    SystemConfig,
    model_settings,
    model_source,
    prompt_hash,
)
from deskbench.runs.runner import EpisodeFn, HasId, system_name
from deskbench.runs.settings import remember_settings
from deskbench.runs.store import RunStore
from deskbench.runs.track import PreparedRun, PreparedSystem
from deskbench.runs.transcript import remember_corpus
from deskbench.tracks.docqa.agents.bm25_protocols.registry import Bm25Choice, choose
from deskbench.tracks.docqa.agents.mdocagent import PIPELINES, PipelineAgent
from deskbench.tracks.docqa.agents.mdocagent.pipeline import TOP_K as PIPELINE_TOP_K
from deskbench.tracks.docqa.agents.registry import NEEDS_CORPUS, NEEDS_SANDBOX, NO_MODEL, make_agent
from deskbench.tracks.docqa.tasks import DocQATask

if TYPE_CHECKING:
    from deskbench.models.types import ChatModel
    from deskbench.sandbox import Sandbox


@runtime_checkable
class CheckedAgent(Protocol):
    """An agent with conditions of its own on the run's model (managed RAG: its provider's models,
    no setting its official request does not send): checked before anything is created."""

    def check_run(self, model: ChatModel | None) -> None: ...


@runtime_checkable
class ConfiguredAgent(Protocol):
    """An agent that takes options of its own from the run (external: --command)."""

    def configure(self, options: Mapping[str, object]) -> None: ...


@dataclass(frozen=True)
class RunSpec:
    agent: str
    model: str | None  # ignored by agents that call no model
    out: Path
    corpus: Path | None = None
    concurrency: int = 16
    max_steps: int | None = None  # None: the agent's own (bm25-agent: its preset's, rlm 30)
    top_k: int | None = None  # None: bm25-agent its preset's, the other agents 5
    view: str | None = None  # image, text, or None: image unless the model reads text only
    sampling: Sampling = Sampling()
    cache: bool = False
    prices: Path | None = None
    unsafe_local: bool = False  # rlm: run the REPL without bubblewrap (debugging only)
    max_sub_calls: int | None = None  # rlm: llm_query calls per episode; None: no cap
    attempts: int = 1  # episodes per task (pass@k, avg@k); attempt 0 is the one MADQA's metrics read
    agent_options: Mapping[str, object] = field(default_factory=dict)  # e.g. external's --command
    protocol: str | None = None  # bm25-agent: official | paper | a protocol's name; None: the preset's
    preset: str | None = None  # bm25-agent: official | paper; None: official (bm25_protocols/registry.py)
    retriever: str = "bm25"  # what the search runs on (search/retriever.py spec); bm25: the page index
    retriever_download: bool = False  # --retriever-download: a hub model may be fetched

    def check(self) -> None:
        if self.view is not None:
            one_of(self.view, VIEWS, "--view")
        for flag, value in (("--attempts", self.attempts), ("--concurrency", self.concurrency),
                            ("--max-steps", self.max_steps),
                            ("--top-k", self.top_k), ("--max-sub-calls", self.max_sub_calls)):
            if value is not None and value < 1:
                raise UserError(f"{flag} {value} is not valid; use 1 or more")
        agent = make_agent(self.agent)  # names the choices when unknown
        if isinstance(agent, ConfiguredAgent):  # its own options are checked before anything starts
            agent.configure(self.agent_options)
        check_agent(self.agent, agent)  # what it needs (an extra, a program, a service) before anything is created
        if self.agent in NEEDS_CORPUS and self.corpus is None:
            raise UserError(f"--agent {self.agent} searches documents: give --corpus DIR (from deskbench ingest)")
        if self.corpus is not None:  # a typo is named before the run directory is made, with the corpora nearby
            require_corpus(self.corpus, "--corpus")
        self.check_retriever()
        if self.agent not in NO_MODEL and not self.model:
            raise UserError(f"--agent {self.agent} calls a model: give --model (e.g. local, openai/gpt-5-mini)")
        if self.agent == "bm25-agent":
            self.bm25_choice()  # an unknown protocol or preset, or none for this provider, before anything starts
        elif self.protocol is not None or self.preset is not None:
            flag = "--protocol" if self.protocol is not None else "--preset"
            raise UserError(f"{flag} chooses bm25-agent's loop; --agent {self.agent} has none: drop {flag}")

    def check_retriever(self) -> None:
        """--retriever's spec and kinds (search/retriever_use.py); refused for an agent that never
        searches, and without a corpus to search."""
        from deskbench.search.retriever_use import check_spec

        if self.agent in PIPELINES:  # m3docrag, colbert-llm, mdocagent: retrievers of their own
            if not check_spec(self.retriever).is_default:
                raise UserError(f"--retriever {self.retriever}: --agent {self.agent} retrieves with its own retrievers; "
                                "give --text-retriever / --image-retriever instead (docs/mdocagent.md)")
            return
        if self.agent == "heaven" and [p.kind for p in check_spec(self.retriever).parts] != ["heaven"]:
            raise UserError(f"--retriever {self.retriever}: --agent heaven retrieves with HEAVEN; give --retriever "
                            "heaven=DSE_MODEL,COLQWEN_MODEL (docs/retrievers.md)")
        if check_spec(self.retriever).is_default:
            if self.retriever_download:
                raise UserError("--retriever-download fetches a --retriever's model; bm25 has none: give "
                                "--retriever KIND=MODEL or drop --retriever-download")
            return
        if self.agent in NEVER_SEARCHES:
            raise UserError(f"--retriever {self.retriever}: --agent {self.agent} never searches (it reads "
                            f"{NEVER_SEARCHES[self.agent]}); drop --retriever, or use an agent that searches")
        if self.corpus is None:
            raise UserError(f"--retriever {self.retriever} searches a corpus: give --corpus DIR (from deskbench ingest)")

    def bm25_choice(self) -> Bm25Choice:
        """bm25-agent's protocol, T and k, and where each came from."""
        from deskbench.models.registry import parse_spec

        provider = parse_spec(self.model).provider if self.model else ""
        return choose(provider, preset=self.preset, protocol_name=self.protocol, max_steps=self.max_steps,
                      top_k=self.top_k)


NEVER_SEARCHES = {"guess": "no pages", "oracle": "the gold pages", "rlm": "every page's text in its REPL"}
"""The docqa agents that call no search, with what they read instead: --retriever is refused for them."""
NEVER_SEARCHES.update(dict.fromkeys(("openai-file-search", "gemini-file-search"),
                                  "what the provider's store retrieves"))  # managed RAG
NEVER_SEARCHES["semtools-agent"] = "the Markdown with semtools' own static-embedding search"

SHOWS_PAGES = {"bm25-agent", "rag", "oracle"}  # the docqa agents that put pages in front of the model


def choose_view(spec: RunSpec, settings: ResolvedSettings | None) -> tuple[View, list[str]]:
    """The view the agent uses, and a warning when it is not the one asked for by default: page
    images to a model that reads text only would be dropped (or refused) on every call."""
    asked = None if spec.view is None else one_of(spec.view, VIEWS, "--view")
    if spec.agent not in SHOWS_PAGES or settings is None or settings.vision:
        return asked or "image", []
    if asked == "image":
        raise UserError(f"--view image: {settings.model} reads text only (no vision, per deskbench's capability "
                        "table); use --view text, or give --capabilities FILE if the model does take images")
    if asked is None:
        return "text", [f"{settings.model} reads text only: pages are shown as text (--view text)"]
    return asked, []


def prepare(spec: RunSpec, tasks: Sequence[DocQATask], *, tasks_file: str | None = None) -> PreparedRun:
    """Open the run over `tasks` (kept with the run, which is scored over them) and its model.
    The model comes first: a missing key or a refused setting stops before anything is created."""
    spec.check()
    model = None
    if spec.agent not in NO_MODEL:
        assert spec.model is not None
        model = open_model(spec.model, sampling=spec.sampling, concurrency=spec.concurrency, cache=spec.cache,
                           prices=spec.prices)
    view, warnings = choose_view(spec, model.settings if model else None)
    sandbox = rlm_sandbox(spec.unsafe_local) if spec.agent in NEEDS_SANDBOX else None  # no bubblewrap: stop here
    corpus = Corpus.open(spec.corpus) if spec.corpus else None
    retriever = None
    if corpus is not None:  # its index is built now, before the run directory exists (a missing model stops here)
        from deskbench.search.retriever_use import open_on

        retriever = open_on(corpus, spec.retriever, allow_download=spec.retriever_download)
    agent = make_agent(spec.agent)
    if isinstance(agent, ConfiguredAgent):
        agent.configure(spec.agent_options)
    if isinstance(agent, CheckedAgent):
        agent.check_run(model)
    own_retrievers: dict[str, object] = {}  # a pipeline agent's retrievers, opened (indexes built) now
    if corpus is not None and isinstance(agent, PipelineAgent):
        own_retrievers = agent.open_retrievers(corpus, allow_download=spec.retriever_download)
    store = RunStore(spec.out)  # the runner files the tasks, records the system's identity, counts what is done
    system = system_name(spec.agent, model.id) if model else spec.agent
    if model is not None:
        remember_settings(store, system, model)
    remember_corpus(store, system, spec.corpus)  # page texts in transcripts are stored by reference to it
    settings = AgentSettings(max_steps=spec.max_steps,
                             top_k=spec.top_k or (PIPELINE_TOP_K if spec.agent in PIPELINES else 5), view=view,
                             max_sub_calls=spec.max_sub_calls)
    choice = None
    if spec.agent == "bm25-agent":
        choice = spec.bm25_choice()
        settings = replace(settings, max_steps=choice.max_steps, top_k=choice.top_k, protocol=choice.protocol)
        if choice.warning:
            warnings.append(choice.warning)
    config = docqa_config(spec.agent, model.id if model else None, settings, model_settings(model),
                          {**spec.agent_options, **own_retrievers},
                          source=model_source(model), choice=choice,
                          retriever=retriever.identity() if retriever is not None else None)

    @asynccontextmanager
    async def start() -> AsyncIterator[dict[str, EpisodeFn]]:
        ctx = AgentContext(
            model=model,
            corpus=corpus,  # searching with the run's retriever (opened above)
            settings=settings,
            sandbox=sandbox,
        )

        async def episode(task: HasId, attempt: int) -> AgentResult:
            assert isinstance(task, DocQATask)
            return await agent.run(task, ctx)

        yield {system: episode}

    prep = PreparedRun(track="docqa", store=store, tasks=list(tasks), systems=[], start=start, attempts=spec.attempts,
                       concurrency=spec.concurrency, warnings=warnings,
                       meta={"tasks_file": tasks_file} if tasks_file is not None else {})
    prep.systems.append(PreparedSystem(name=system, model=model, config=config))
    return prep


# where each docqa agent's prompts and tool descriptions come from (lexical sends none)
_PROMPTS = "deskbench.tracks.docqa.agents.prompts"
PROMPT_MODULES: dict[str, tuple[str, ...]] = {
    "bm25-agent": (_PROMPTS, "deskbench.tracks.docqa.agents.bm25"),
    "rag": (_PROMPTS,), "oracle": (_PROMPTS,), "guess": (_PROMPTS,),
    "rlm": ("deskbench.tracks.docqa.agents.rlm_prompts",),
    "semtools-agent": ("deskbench.tracks.docqa.agents.semtools.prompts",),
    "heaven": ("deskbench.tracks.docqa.agents.heaven",),
    "lexical": (), "external": (),
    **dict.fromkeys(("openai-file-search", "gemini-file-search"), ("deskbench.tracks.docqa.agents.managed_rag.prompts",)),
    **dict.fromkeys(("m3docrag", "colbert-llm", "mdocagent"), ("deskbench.tracks.docqa.agents.mdocagent.prompts",)),
}


def docqa_config(agent: str, model: str | None, settings: AgentSettings,
                 sent: dict[str, object] | None, agent_options: Mapping[str, object] | None = None,
                 source: str | None = None, choice: Bm25Choice | None = None,
                 retriever: Mapping[str, object] | None = None) -> SystemConfig:
    """A docqa system's configuration (runs/identity.py): the agent's settings as it runs them,
    max_steps resolved to the agent's own default when not given; `source`: what the model answers
    from besides the request (identity.model_source); `choice`: bm25-agent's protocol, what it
    reproduces and where each default came from (`deskbench info RUN` shows them); `retriever`: the
    identity of what its search runs on, recorded only when it is not bm25 (configurations stored
    before retrievers stay equal; runs/identity.py IMPLIED_SETTINGS tells a resume it was bm25)."""
    from dataclasses import asdict

    from deskbench.tracks.docqa.agents.bm25 import MAX_STEPS
    from deskbench.tracks.docqa.agents.bm25_protocols.registry import protocol as bm25_protocol
    from deskbench.tracks.docqa.agents.rlm_settings import RlmSettings

    values = asdict(settings)
    values.update(agent_options or {})  # external: the command is part of what the system is
    if values["max_steps"] is None:
        values["max_steps"] = {"bm25-agent": MAX_STEPS, "rlm": RlmSettings().max_iterations}.get(agent)
    modules = PROMPT_MODULES.get(agent, (_PROMPTS,))
    if agent != "bm25-agent":
        values.pop("protocol")  # only bm25-agent has protocols
    elif settings.protocol != "paper":  # the official scripts' prompts live in their protocol's module
        modules = (type(bm25_protocol(settings.protocol)).__module__,)
    if choice is not None:
        values["protocol_source"] = choice.protocol_source
        values["sources"] = dict(choice.sources)
    if retriever is not None:
        values["retriever"] = dict(retriever)
    if agent == "semtools-agent":  # the paper's tools and prompt on deskbench's loop: its parts, named
        from deskbench.tracks.docqa.agents.semtools.agent import identity

        values["semtools"] = identity()
    if agent in PIPELINES:  # MDocAgent's page rendering and depth, not the --dpi / --view settings
        from deskbench.tracks.docqa.agents.mdocagent.pipeline import identity as pipeline_identity

        for unused in ("dpi", "max_sub_calls"):
            values.pop(unused)
        values["view"] = "+".join(PIPELINES[agent].modalities)  # what the model is shown: text, image or both
        values["mdocagent"] = pipeline_identity()
    if agent == "heaven":  # the official request's pages and limits, not the --dpi / --view / --top-k settings
        from deskbench.tracks.docqa.agents.heaven import identity as heaven_identity

        for unused in ("dpi", "view", "max_image_bytes", "top_k"):
            values.pop(unused)
        values["heaven"] = heaven_identity()
    return SystemConfig(track="docqa", agent=agent, model=model, settings=values, model_settings=sent, model_source=source,
                        prompt_hash=prompt_hash(*modules))


def rlm_sandbox(unsafe_local: bool) -> Sandbox:
    """The jail of the rlm agent's REPL. One process lives for a whole episode, so its CPU
    rlimit (a lifetime total, not per execution) is larger than execute_code's 60 s; the wall
    time stays the limit of one execution."""
    from deskbench.sandbox import Limits, Sandbox

    return Sandbox(Limits(cpu_seconds=600), unsafe_local=unsafe_local)
