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

from deskbench.agents.base import AgentContext, AgentResult, AnswerArgs, stamped
from deskbench.errors import QuerySyntaxError
from deskbench.tasks.trajectory import Citation, ToolCallStep
from deskbench.tracks.docqa.agents.protocol import submission_of
from deskbench.tracks.docqa.agents.single_call import question_query
from deskbench.tracks.docqa.tasks import DocQATask

_WORD = re.compile(r"[^\W_]+")
_VALUE = re.compile(r"[$€£₹]?\s?-?\d[\d,]*(?:\.\d+)?\s?%?|\b\d{4}-\d{2}-\d{2}\b")
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has", "have", "how", "in", "is", "it", "its", "of", "on", "or", "that", "the", "their", "there", "these", "this", "to", "was", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with"]
)
MAX_WORDS = 8


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _stem(word: str) -> str:
    """A crude stem (first five letters) so that 'seat' meets 'seats' and 'opened' meets 'opens'."""
    return word[:5]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$€£₹])")
# "Label: value" pairs, several to a line when a form has two columns.
# A label is a capitalised word and up to three lower-case ones ("Site address:").
_PAIR_LABEL = re.compile(r"(?:^|(?<=\s))([A-Z][a-z()/-]*(?: [a-z()/-]+){0,3}):\s+")


def units(text: str) -> list[str]:
    """The candidate answer spans of a page: its lines (forms and table rows) and its sentences
    (running text wraps across lines)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    flowing = " ".join(lines)
    sentences = [s.strip() for s in _SENTENCE_END.split(flowing) if s.strip()]
    return lines + [s for s in sentences if s not in lines]


def best_line(question: str, pages: Sequence[tuple[str, int, str]]) -> tuple[str, int, str] | None:
    """(document, page, span) of the line or sentence sharing the most question words, each
    weighted by its rarity across the retrieved spans; earlier-ranked pages win ties."""
    wanted = {_stem(w) for w in _words(question) if w not in STOPWORDS}
    spans = [(doc, page, unit) for doc, page, text in pages for unit in units(text)]
    if not wanted or not spans:
        return None
    bags = [{_stem(w) for w in _words(unit)} for _, _, unit in spans]
    df = {w: sum(w in bag for bag in bags) for w in wanted}
    weight = {w: math.log(1 + len(spans) / df[w]) for w in wanted if df[w]}
    # Shorter spans win among equals: a form line says less beside its answer than a paragraph.
    scores = [sum(weight.get(w, 0.0) for w in bag & wanted) - 0.01 * len(bag) for bag in bags]
    best = max(range(len(spans)), key=lambda i: (scores[i], -i))
    return spans[best] if scores[best] > 0 else None


def _after_last_match(question: str, span: str) -> str:
    """The value right after the last question word in the span: a number, or a run of
    capitalised words (a name), e.g. 'Head chef Anders Larsen cooks' -> 'Anders Larsen'."""
    asked = {_stem(w) for w in _words(question) if w not in STOPWORDS}
    tokens = span.split()
    last = max((i for i, t in enumerate(tokens) if any(_stem(w) in asked for w in _words(t))), default=-1)
    rest = tokens[last + 1:]
    if not rest:
        return ""
    if _VALUE.fullmatch(rest[0].strip(".,;")):
        return rest[0].strip(".,;")
    name = []
    for t in rest:
        if not t[:1].isupper():
            break
        name.append(t.strip(".,;"))
        if t[-1:] in ".,;":
            break
    return " ".join(name)


def label_pairs(line: str) -> list[tuple[str, str]]:
    """[(label, value)] of a form line, e.g. 'Applicant: J. Alvarez Site address: 69 Harbour'."""
    marks = list(_PAIR_LABEL.finditer(line))
    pairs = []
    for i, m in enumerate(marks):
        nxt = marks[i + 1] if i + 1 < len(marks) else None
        value = line[m.end(): nxt.start() if nxt else len(line)].strip()
        if value:
            pairs.append((m.group(1), value))
    return pairs


def extract_answer(question: str, line: str) -> str:
    """The part of a span that answers: the value of a 'label: value' line, else what follows
    the last question word, else a value not in the question, else the words the question
    does not contain."""
    pairs = label_pairs(line)
    if pairs:
        asked = {_stem(w) for w in _words(question) if w not in STOPWORDS}
        label, value = max(pairs, key=lambda p: len({_stem(w) for w in _words(p[0])} & asked))
        return " ".join(value.split()[:MAX_WORDS])
    following = _after_last_match(question, line)
    if following:
        return following
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
            hits = ctx.corpus.search(query, ctx.settings.top_k, snippets=False) if query else []
        except QuerySyntaxError:
            hits = []
        pages = [(h.document, h.page) for h in hits]
        step = stamped(ToolCallStep(name="search_documents", arguments={"query": query},
                                    result={"pages": [list(p) for p in pages]}))
        texts = [(d, p, t) for (d, p), t in zip(pages, ctx.corpus.page_texts(pages), strict=True)]
        found = best_line(task.question, texts)
        if found is None:
            args = AnswerArgs.model_construct(answer=[], citations=[])
        else:
            doc, page, line = found
            args = AnswerArgs.model_construct(answer=[extract_answer(task.question, line)],
                                              citations=[Citation(document=doc, page=page)])
        return AgentResult(status="ok", submission=submission_of(task, args, steps=1, search_history=[query]),
                           trajectory=[step])
