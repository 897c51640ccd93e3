"""Highlighted snippets: the passage of a page where the query's terms cluster.

tantivy's own snippet generator cannot highlight wildcard (regex) matches, so deskbench finds
the words itself with the same analyzer. Matches are wrapped in **double asterisks**: readable
for a model in a tool result, and rendered as bold by the terminal and the web app.
"""

from __future__ import annotations

import re

from deskbench.search.analyzer import TOKEN_RE, analyze
from deskbench.search.query import Highlights

SNIPPET_CHARS = 240
_SPACES = re.compile(r"\s+")


_WORD = r"[^\W_]"


def _ascii_pattern(hl: Highlights) -> re.Pattern[str]:
    """One regex over lower-cased ASCII text that finds exactly the words the query matched."""
    alts = [re.escape(t) for t in sorted(hl.terms, key=len, reverse=True)]
    # Wildcard regexes are escaped alphanumerics plus '.*' and '.' (see query._wildcard).
    alts += [p.pattern.replace(".*", f"{_WORD}*").replace(".", _WORD) for p in hl.patterns]
    return re.compile(rf"(?<!{_WORD})(?:{'|'.join(alts)})(?!{_WORD})")


def _match_spans(text: str, hl: Highlights) -> list[tuple[int, int, str]]:
    if text.isascii() and (hl.terms or hl.patterns):
        # Fast path for the common case: lowercasing ASCII keeps offsets, and folding is a no-op.
        if hl.ascii_re is None:
            hl.ascii_re = _ascii_pattern(hl)
        return [(m.start(), m.end(), m.group()) for m in hl.ascii_re.finditer(text.lower())]
    spans = []
    for m in TOKEN_RE.finditer(text):
        terms = analyze(m.group())
        for term in terms:
            if hl.matches(term):
                spans.append((m.start(), m.end(), term))
                break
    return spans


def make_snippet(text: str, hl: Highlights, max_chars: int = SNIPPET_CHARS) -> str:
    """A window of about `max_chars` around the densest cluster of matched words."""
    spans = _match_spans(text, hl)
    if not spans:
        return _SPACES.sub(" ", text[:max_chars]).strip()
    best_start, best_key = 0, (-1, -1)
    lead = max_chars // 5
    for i, (start, _, _) in enumerate(spans):
        window_start = max(0, start - lead)
        window_end = window_start + max_chars
        inside = [s for s in spans[i:] if s[1] <= window_end]
        key = (len({s[2] for s in inside}), len(inside))
        if key > best_key:
            best_key, best_start = key, window_start
    window_end = min(len(text), best_start + max_chars)
    # Do not cut words in half at the edges.
    limit = max(0, best_start - 20)
    while best_start > limit and not text[best_start - 1].isspace():
        best_start -= 1
    while window_end < len(text) and not text[window_end].isspace():
        window_end += 1
    pieces: list[str] = []
    cursor = best_start
    for start, end, _ in spans:
        if start < best_start or end > window_end:
            continue
        pieces.append(text[cursor:start])
        pieces.append(f"**{text[start:end]}**")
        cursor = end
    pieces.append(text[cursor:window_end])
    snippet = _SPACES.sub(" ", "".join(pieces)).strip()
    prefix = "… " if best_start > 0 else ""
    suffix = " …" if window_end < len(text) else ""
    return f"{prefix}{snippet}{suffix}"
