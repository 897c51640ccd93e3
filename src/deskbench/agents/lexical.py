"""The no-model lexical baseline: one BM25 search with the question, then the answer read off
the best-matching line of the top pages.

It needs no model and no key, so `deskbench demo` can always show a floor: what keyword
overlap alone achieves. The line that shares the most (and rarest) question words wins; its
answer is the value after a "label:" if there is one, else the first number, date or amount
the question does not already contain, else the line's words that are not in the question.
Layout and visual questions (checkboxes, colours, scans without OCR) defeat it by design.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence

from deskbench.agents.base import AgentContext, AgentResult, AnswerArgs, submission_of
from deskbench.agents.single_call import question_query
from deskbench.errors import QuerySyntaxError
from deskbench.tasks.docqa import Citation, DocQATask, ToolCallStep

_WORD = re.compile(r"[^\W_]+")
_VALUE = re.compile(r"[$€£₹]?\s?-?\d[\d,]*(?:\.\d+)?\s?%?|\b\d{4}-\d{2}-\d{2}\b")
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or that the "
    "their there these this to was were what when where which who whom whose why will with".split()
)
MAX_WORDS = 8


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def best_line(question: str, pages: Sequence[tuple[str, int, str]]) -> tuple[str, int, str] | None:
    """(document, page, line) of the line sharing the most question words, each weighted by its
    rarity across the retrieved lines; earlier-ranked pages win ties."""
    wanted = {w for w in _words(question) if w not in STOPWORDS}
    lines = [(doc, page, line.strip()) for doc, page, text in pages for line in text.splitlines() if line.strip()]
    if not wanted or not lines:
        return None
    bags = [set(_words(line)) for _, _, line in lines]
    df = {w: sum(w in bag for bag in bags) for w in wanted}
    weight = {w: math.log(1 + len(lines) / df[w]) for w in wanted if df[w]}
    scores = [sum(weight.get(w, 0.0) for w in bag & wanted) for bag in bags]
    best = max(range(len(lines)), key=lambda i: (scores[i], -i))
    return lines[best] if scores[best] > 0 else None


def extract_answer(question: str, line: str) -> str:
    """The part of a line that answers: after 'label:', else a value not in the question, else the
    words the question does not contain."""
    if ":" in line:
        value = line.split(":", 1)[1].strip()
        if value:
            return " ".join(value.split()[:MAX_WORDS])
    asked = set(_words(question))
    for match in _VALUE.finditer(line):
        value = match.group().strip()
        if not set(_words(value)) <= asked:
            return value
    rest = [w for w in line.split() if not set(_words(w)) <= asked]
    return " ".join(rest[:MAX_WORDS])


class LexicalAgent:
    name = "lexical"
    needs_model = False

    async def run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        return await asyncio.to_thread(self._run, task, ctx)

    def _run(self, task: DocQATask, ctx: AgentContext) -> AgentResult:
        assert ctx.corpus is not None, "lexical needs a corpus"
        query = question_query(task.question)
        try:
            hits = ctx.corpus.search(query, ctx.settings.top_k) if query else []
        except QuerySyntaxError:
            hits = []
        pages = [(h.document, h.page) for h in hits]
        step = ToolCallStep(name="search_documents", arguments={"query": query},
                            result={"pages": [list(p) for p in pages]})
        texts = [(doc, page, ctx.corpus.page_text(doc, page).text) for doc, page in pages]
        found = best_line(task.question, texts)
        if found is None:
            args = AnswerArgs.model_construct(answer=[], citations=[])
        else:
            doc, page, line = found
            args = AnswerArgs.model_construct(answer=[extract_answer(task.question, line)],
                                              citations=[Citation(document=doc, page=page)])
        return AgentResult(status="ok", submission=submission_of(task, args, steps=1, search_history=[query]),
                           trajectory=[step])
