"""Highlighted snippets: the passage of a page where the query's terms cluster.

The words are found with the index's own analyzer (Whoosh's), so a highlighted word is one the
page was found by. Matches are wrapped in **double asterisks**: readable for a model in a tool
result, and rendered as bold by the terminal and the web app.
"""

from __future__ import annotations

import re
from collections import Counter

from deskbench.search.analyzer import WORD_RE, is_stopped
from deskbench.search.query import Highlights

SNIPPET_CHARS = 240
_SPACES = re.compile(r"\s+")

Span = tuple[int, int, str]


def _word_char(low: str, i: int, step: int) -> bool:
    """Whether the word at the edge continues at low[i] (step: -1 before it, +1 after it): a
    letter, digit or underscore, or a dot with one of those beyond it (Whoosh's `3.5`)."""
    if not 0 <= i < len(low):
        return False
    c = low[i]
    if c.isalnum() or c == "_":
        return True
    j = i + step
    return c == "." and 0 <= j < len(low) and (low[j].isalnum() or low[j] == "_")


def _ascii_spans(low: str, hl: Highlights) -> list[Span] | None:
    """Matches in lower-cased ASCII text found with str.find (C speed); None when a wildcard
    without a literal start or a term with a dot (`3.5`) needs the token path."""
    if any("." in t for t in hl.terms) or any(not lit or "." in lit for lit in hl.literals):
        return None
    spans: dict[int, Span] = {}
    for term in hl.terms:
        i = low.find(term)
        while i != -1:
            end = i + len(term)
            # A match is a whole word: the word does not go on before or after it.
            if not _word_char(low, i - 1, -1) and not _word_char(low, end, 1):
                spans[i] = (i, end, term)
            i = low.find(term, end)
    for pattern, literal in zip(hl.patterns, hl.literals, strict=True):
        i = low.find(literal)
        while i != -1:
            word = WORD_RE.match(low, i) if not _word_char(low, i - 1, -1) else None
            if word is not None and not is_stopped(word.group()) and pattern.fullmatch(word.group()):
                spans.setdefault(i, (i, word.end(), word.group()))
            i = low.find(literal, i + 1)
    return [spans[i] for i in sorted(spans)]


def _token_spans(text: str, hl: Highlights) -> list[Span]:
    """Matches found by running the index's tokenizer over the text (any script)."""
    spans = []
    for m in WORD_RE.finditer(text):
        term = m.group().lower()
        if not is_stopped(term) and hl.matches(term):
            spans.append((m.start(), m.end(), term))
    return spans


def _match_spans(text: str, hl: Highlights) -> list[Span]:
    if text.isascii():
        spans = _ascii_spans(text.lower(), hl)  # lower-casing ASCII keeps offsets
        if spans is not None:
            return spans
    return _token_spans(text, hl)


def _best_window(spans: list[Span], width: int) -> int:
    """Start of the window of `width` chars holding the most distinct terms, then most matches."""
    lead = width // 5
    counts: Counter[str] = Counter()
    best_key, best_start = (-1, -1), 0
    right = 0
    for left, (start, _, _) in enumerate(spans):
        right = max(right, left)  # counts holds exactly spans[left:right]
        window_start = max(0, start - lead)
        window_end = window_start + width
        while right < len(spans) and spans[right][1] <= window_end:
            counts[spans[right][2]] += 1
            right += 1
        key = (len(counts), right - left)
        if key > best_key:
            best_key, best_start = key, window_start
        if right > left:
            term = spans[left][2]
            counts[term] -= 1
            if not counts[term]:
                del counts[term]
    return best_start


def make_snippet(text: str, hl: Highlights, max_chars: int = SNIPPET_CHARS) -> str:
    """A window of about `max_chars` around the densest cluster of matched words."""
    spans = _match_spans(text, hl)
    if not spans:
        return _SPACES.sub(" ", text[:max_chars]).strip()
    start = _best_window(spans, max_chars)
    end = min(len(text), start + max_chars)
    # Do not cut words in half at the edges.
    limit = max(0, start - 20)
    while start > limit and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    pieces: list[str] = []
    cursor = start
    for s, e, _ in spans:
        if s < start or e > end:
            continue
        pieces.append(text[cursor:s])
        pieces.append(f"**{text[s:e]}**")
        cursor = e
    pieces.append(text[cursor:end])
    snippet = _SPACES.sub(" ", "".join(pieces)).strip()
    prefix = "… " if start > 0 else ""
    suffix = " …" if end < len(text) else ""
    return f"{prefix}{snippet}{suffix}"
