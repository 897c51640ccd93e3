"""The RLM-style agent (`rlm`): MADQA Appendix G.5, Recursive Language Models.

The corpus is a `context` string in a sandboxed Python REPL (one long-lived process per
episode, see rlm_repl.py): every page's text under [FILE: doc.pdf] and [PAGE N] ... [END PAGE N]
markers, as the paper augments its corpus for citation extraction. The root model gets Prompt 9
and, for at most 30 root iterations (the RLM library's default, RLM(max_iterations=30) in
rlm/core/rlm.py, which the official baseline's RLMAgent does not change; --max-steps sets
another), writes ```repl``` blocks that are run in order; their output comes back truncated.
Code may call `llm_query` / `llm_query_batched`: the same model answers them through the
Recorder, so the trajectory and usage count them; there is no cap on them, as in the official
RLM (RlmSettings.max_sub_calls or --max-sub-calls sets one). A reply with FINAL(...) or
FINAL_VAR(name) (the paper's FINAL.VAR) outside code ends the loop; then the paper's
structured-output extraction step turns the raw answer into answer + citations with the same
model (schema, one repair turn). No final answer within the iterations: one more call asks for
one, as the RLM library's `_default_answer` does (counted in llm_calls, as the library's usage
counts it); only an empty reply to it ends the episode as "limit".

Effort: the official RLM baseline (baselines/recursive-lm/rlm_agent.py) writes no
`search_history` and no `iterations`; its `trajectory` dict holds `llm_calls`, the RLM usage
summary's total_calls over every model (root iterations and llm_query sub-calls; the extraction
step is a separate client and is not counted), with input/output tokens and execution_time.
The official evaluator (eval/evaluate.py) reads len(search_history), else `iterations`, else 0,
so it gives the official RLM output effort 0 (left out of Kuiper); the paper's RLM calibration
counts LLM calls. So an rlm episode stores `llm_calls` = root model calls + sub-calls that
reached the model, `steps` = the same (deskbench's effort, which the scorer reads first), and no
`iterations`, as the official output. Each code execution is a ToolCallStep "repl" ({"code"} ->
{"stdout_chars", "error", "llm_queries"}).

A REPL that dies or runs past the wall time of one execution (the sandbox's wall_seconds; time
spent waiting for sub-calls is not counted) is killed, restarted with `context` reloaded, and
the model is told its variables are gone. The process is always killed at episode end.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from deskbench.agents.base import (
    AgentContext,
    AgentResult,
    Recorder,
    answer_once,
    recorded,
)
from deskbench.models.types import ChatRequest, Message, ModelError
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.agents.rlm_context import ContextStats, CorpusContext
from deskbench.tracks.docqa.agents.rlm_prompts import (
    CONTEXT_NOTE,
    DEFAULT_ANSWER,
    EXTRACT_SYSTEM,
    EXTRACT_USER,
    FIRST_TURN,
    LAST_TURN,
    NEXT_TURN,
    NO_ACTION,
    QUESTION,
    REPL_LOST,
    RLM_SYSTEM,
)
from deskbench.tracks.docqa.agents.rlm_repl_host import QueryFn, QueryRefused, Repl
from deskbench.tracks.docqa.agents.rlm_replies import Final, find_final, repl_blocks, shown
from deskbench.tracks.docqa.agents.rlm_settings import RlmSettings
from deskbench.tracks.docqa.tasks import DocQATask


@dataclass
class _Calls:
    """The episode's LLM calls so far (root iterations and answered sub-calls)."""

    made: int = 0


class RlmAgent:
    name = "rlm"

    def __init__(self, settings: RlmSettings = RlmSettings()) -> None:  # noqa: B008 - frozen
        self.settings = settings
        self.context = CorpusContext()

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await recorded(ctx, lambda rec: self._run(task, ctx, rec))

    async def _run(self, task: DocQATask, ctx: AgentContext, rec: Recorder) -> AgentResult:
        assert ctx.corpus is not None, "rlm needs a corpus"
        if ctx.sandbox is None:
            return rec.result("error", error="rlm runs model code: the run has no sandbox")
        context_file, stats = await self.context.get(ctx.corpus)
        repl = Repl(ctx.sandbox, context_file, self.settings)
        try:
            return await self._loop(task, ctx, rec, repl, stats)
        finally:
            repl.close()

    async def _loop(self, task: DocQATask, ctx: AgentContext, rec: Recorder, repl: Repl,
                    stats: ContextStats) -> AgentResult:
        problem = await repl.start()
        if problem is not None:
            return rec.result("error", error=f"the REPL {problem}")
        note = CONTEXT_NOTE.format(chars=stats.chars, documents=stats.documents, pages=stats.pages)
        messages = [
            Message(role="system", content=RLM_SYSTEM),
            Message(role="user", content=f"{note}\n\n{QUESTION.format(question=task.question)}\n\n{FIRST_TURN}"),
        ]
        calls = _Calls()
        answer_sub = self._sub_caller(rec, calls, ctx.settings.max_sub_calls)
        max_steps = ctx.settings.max_steps or self.settings.max_iterations
        for iteration in range(1, max_steps + 1):
            response = await rec.complete(ChatRequest(messages=messages))
            calls.made += 1
            reply = response.message.text()
            messages.append(Message(role="assistant", content=reply))
            feedback: list[str] = []
            blocks = repl_blocks(reply)
            for i, code in enumerate(blocks, start=1):
                out = await repl.execute(code, answer_sub)
                result: dict[str, Any] = {"stdout_chars": out.stdout_chars, "error": out.error or out.lost is not None,
                                          "llm_queries": out.llm_queries}
                if out.lost is not None:
                    result["repl_lost"] = out.lost
                rec.add(ToolCallStep(name="repl", arguments={"code": code}, result=result,
                                     seconds=out.seconds), detail={"stdout": out.stdout, "stderr": out.stderr})
                if out.restart_failed is not None:
                    return rec.result("error", error=f"the REPL {out.lost} and could not be restarted: "
                                                     f"{out.restart_failed}")
                label = f"REPL output (block {i} of {len(blocks)}):" if len(blocks) > 1 else "REPL output:"
                if out.lost is None:
                    feedback.append(f"{label}\n{shown(out.text(), self.settings.output_chars)}")
                    continue
                partial = [shown(out.text(), self.settings.output_chars)] if out.stdout or out.stderr else []
                feedback.append("\n".join([label, *partial, REPL_LOST.format(why=out.lost)]))
                if i < len(blocks):
                    feedback.append(f"The remaining {len(blocks) - i} block(s) of your reply were not run.")
                break
            final = find_final(reply)
            if final is not None:
                raw, problem = await self._final_text(final, repl)
                if raw is not None:
                    return await self._extract(task, rec, raw, calls.made)
                feedback.append(problem)
            elif not blocks:
                feedback.append(NO_ACTION)
            turn = NEXT_TURN.format(question=task.question)
            if iteration + 1 == max_steps:
                turn += " " + LAST_TURN
            messages.append(Message(role="user", content="\n\n".join([*feedback, turn])))
        return await self._default_answer(task, rec, messages, calls, max_steps)

    async def _default_answer(self, task: DocQATask, rec: Recorder, messages: list[Message], calls: _Calls,
                              max_steps: int) -> AgentResult:
        """Out of root iterations without FINAL: as the RLM library, one more call asks for a final
        answer from what the conversation holds, and its reply is the raw answer. The library sends
        the request as an assistant turn; here it closes the last user turn, since some providers
        refuse a conversation that ends with an assistant turn (a prefill)."""
        last = messages[-1]
        messages = [*messages[:-1], Message(role="user", content=f"{last.content}\n\n{DEFAULT_ANSWER}")]
        response = await rec.complete(ChatRequest(messages=messages))
        calls.made += 1
        raw = response.message.text().strip()
        if not raw:
            return rec.result("limit", error=f"no FINAL answer after {max_steps} iterations, "
                                             "and an empty reply when asked for one")
        return await self._extract(task, rec, raw[: self.settings.final_chars], calls.made)

    def _sub_caller(self, rec: Recorder, calls: _Calls, cap: int | None) -> QueryFn:
        """llm_query's host side: the same model, one user message per prompt, at most
        sub_concurrency at once; at most `cap` (else RlmSettings.max_sub_calls) in the episode
        when one is set. Each answered call counts in `calls`."""
        slots = asyncio.Semaphore(self.settings.sub_concurrency)
        budget = cap if cap is not None else self.settings.max_sub_calls
        used = 0

        async def one(prompt: str) -> str:
            async with slots:
                response = await rec.complete(ChatRequest(messages=[Message(role="user", content=prompt)]))
            calls.made += 1
            return response.message.text()

        async def answer(prompts: list[str]) -> list[str]:
            nonlocal used
            if budget is not None and used + len(prompts) > budget:
                raise QueryRefused(f"the episode's budget of {budget} llm_query calls is spent "
                                   f"({used} used, {len(prompts)} asked for)")
            used += len(prompts)
            replies = await asyncio.gather(*(one(p) for p in prompts), return_exceptions=True)
            for r in replies:  # every call has finished: none is left running unobserved
                if isinstance(r, ModelError):
                    raise QueryRefused(f"llm_query failed: {r}") from r
                if isinstance(r, BaseException):
                    raise r
            return [r for r in replies if isinstance(r, str)]

        return answer

    async def _final_text(self, final: Final, repl: Repl) -> tuple[str | None, str]:
        """The raw final answer, or None and what to tell the model."""
        if final.kind == "answer":
            return final.text[: self.settings.final_chars], ""
        if not final.text.isidentifier():
            return None, f"FINAL_VAR({final.text}) needs the name of a REPL variable."
        value, problem = await repl.get_var(final.text)
        if value is None:
            return None, f"FINAL_VAR({final.text}): {problem}. Assign it in a ```repl``` block first."
        return value[: self.settings.final_chars], ""

    async def _extract(self, task: DocQATask, rec: Recorder, raw: str, llm_calls: int) -> AgentResult:
        """Appendix G.5's structured-output step: the same model normalises the raw answer (not
        counted in llm_calls, as the official baseline's separate client is not)."""
        messages = [Message(role="system", content=EXTRACT_SYSTEM),
                    Message(role="user", content=EXTRACT_USER.format(question=task.question, raw=raw))]
        args, problem = await answer_once(rec, messages)
        if args is None:
            return rec.result("error", error=f"unparseable answer: {problem}")
        return rec.result("ok", submission_of(task, args, steps=llm_calls, llm_calls=llm_calls))
