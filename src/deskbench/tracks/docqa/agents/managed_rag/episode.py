"""A managed-RAG answer as a deskbench episode: the reply read as the official script reads it,
the submission validated as `deskbench import` validates the script's output line (so the run
scores like that file), the call in the trajectory and transcript with its usage and cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deskbench.agents.base import AgentContext, AgentResult, Recorder
from deskbench.models.settings import unsent_refusal
from deskbench.models.types import ChatModel, ChatRequest, ChatResponse, Message, Usage
from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
from deskbench.tracks.docqa.agents.managed_rag.prompts import official_parse
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, submission_context


@dataclass
class Reply:
    """What one managed-RAG request came back with."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    # what the service says it retrieved (OpenAI: the file_citation annotations; Gemini: the
    # grounding metadata), as the official script records it
    retrieval: dict[str, Any] = field(default_factory=dict)
    api_citations: list[dict[str, Any]] = field(default_factory=list)  # OpenAI's fallback citations


def model_name(ctx: AgentContext, agent: str, providers: tuple[str, ...], example: str) -> str:
    """The model's name at its provider; ValueError with the fix when it is another provider's."""
    model_id = ctx.model.id if ctx.model is not None else ""
    provider, _, name = model_id.partition("/")
    if provider not in providers or not name:
        raise ValueError(f"--agent {agent} runs on {' or '.join(p + '/' for p in providers)} models; "
                         f"--model {model_id or '(none)'} is not one: give e.g. --model {example}")
    return name


def check_model(model: ChatModel | None, agent: str, providers: tuple[str, ...], example: str) -> None:
    """The run's model refused before anything is created (tracks/docqa/run.py calls an agent's
    `check_run`): another provider's model, or a setting the official request does not send.
    The episodes check the same again, for a caller that builds the context itself."""
    from deskbench.errors import UserError

    try:
        model_name(AgentContext(model=model, corpus=None), agent, providers, example)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if (refused := unsent_settings(model, agent)) is not None:
        raise UserError(refused)


def unsent_settings(model: object, agent: str) -> str | None:
    """The refusal of model settings the official request does not carry (neither script sets
    temperature, top_p, reasoning effort or an output limit), or None."""
    return unsent_refusal(model, f"--agent {agent} sends the official script's request, which sets no {{flags}}")


def cost_of(rec: Recorder, model_id: str, input_tokens: int, output_tokens: int) -> float | None:
    """The tokens' USD at the run's price table (None: the model has no price)."""
    prices = getattr(rec.model, "prices", None)
    if prices is None:
        from deskbench.models.prices import PriceTable

        prices = PriceTable()
    return prices.cost(model_id, input_tokens, output_tokens)


def finish(task: DocQATask, rec: Recorder, model_id: str, sent: list[Message], reply: Reply,
           tool: str) -> AgentResult:
    """The episode of one answered request; `sent` is what the request held, for the transcript."""
    parsed, _ = official_parse(reply.text)
    citations = parsed["citations"]
    if not citations and reply.api_citations:  # openai: the annotations when the JSON names none
        citations = reply.api_citations
    cost = cost_of(rec, model_id, reply.input_tokens, reply.output_tokens)
    usage = Usage(calls=1, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                  seconds=reply.seconds, cost_usd=cost)
    response = ChatResponse(message=Message(role="assistant", content=reply.text), usage=usage, model=model_id)
    at = rec.transcript.elapsed()
    rec.transcript.model_call(model_id, ChatRequest(messages=sent), response, at=max(0.0, at - reply.seconds),
                              seconds=reply.seconds)
    rec.usage = rec.usage + usage
    rec.add(ToolCallStep(name=tool, arguments={"question": task.question}, result=reply.retrieval,
                         seconds=round(reply.seconds, 4)))
    rec.add(ModelCallStep(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                          seconds=round(reply.seconds, 4), cost_usd=cost))
    dropped: list[str] = []
    row = {"id": task.id, "question": task.question, "answer": parsed["answer"], "citations": citations,
           "iterations": 1}
    submission = DocQASubmission.model_validate(row, context=submission_context(False, [], dropped))
    if dropped:  # a page-less annotation, a page that is no number: dropped as `deskbench import` drops it
        rec.transcript.tool("citations_dropped", {}, {"dropped": dropped})
    return rec.result("ok", submission)
