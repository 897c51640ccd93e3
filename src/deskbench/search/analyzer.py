"""The one text analyzer shared by indexing, query parsing and snippet highlighting: Whoosh's.

MADQA's official BM25 tool indexes page text with a `TEXT()` field of whoosh 2.7.4, whose
default analyzer is `StandardAnalyzer()`: a RegexTokenizer `\\w+(\\.?\\w+)*` (Python's Unicode
`\\w`), a LowercaseFilter (`str.lower` of each token) and a StopFilter with Whoosh's 34
STOP_WORDS and minsize=2 that renumbers positions. deskbench indexes exactly those words:

- a word is a run of word characters, and single dots between word characters do not split it
  (`3.5`, `U.S.` (as `u.s`), `e.g`, `a.pdf` are one word each), nor do underscores;
- Whoosh's stop words ("the", "of", "and", ...) and words of one character are not indexed, and
  the positions of the words left are renumbered: the phrase "bank america" matches the text
  "Bank of America", as in Whoosh;
- nothing else: no accent folding (`café` and `cafe` are different words), no splitting of CJK
  runs (a run of Chinese characters is one word), no length limit.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

ANALYZER_NAME = "whoosh-2.7.4-standard"
"""Stored with the index: an index built by another analyzer is detected and rebuilt."""

STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "have", "if", "in", "is",
    "it", "may", "not", "of", "on", "or", "tbd", "that", "the", "this", "to", "us", "we", "when",
    "will", "with", "yet", "you", "your",
))
"""whoosh.analysis.STOP_WORDS (whoosh 2.7.4), the official MADQA index's stop list."""
MIN_WORD_CHARS = 2

WORD_RE = re.compile(r"\w+(?:\.?\w+)*")
"""whoosh.analysis.tokenizers.default_pattern, its group made non-capturing (same matches)."""
TOKEN_RE = WORD_RE  # the name snippet code used


def lowered_words(text: str) -> list[str]:
    """Every token of `text`, lower-cased, stop words included (Whoosh's tokenizer and
    LowercaseFilter). The tokens are lower-cased in one call: joined by spaces, which no token
    holds and str.lower never makes, the case mapping of each token is the one it has alone
    (final sigma included: a space ends a word for it)."""
    tokens = WORD_RE.findall(text)
    if not tokens:
        return tokens
    return " ".join(tokens).lower().split(" ")


def index_terms(text: str) -> list[str]:
    """The terms Whoosh indexes for `text`, in order (their positions are their indexes)."""
    stop = STOP_WORDS
    return [w for w in lowered_words(text) if len(w) >= MIN_WORD_CHARS and w not in stop]


@lru_cache(maxsize=65536)
def analyze(text: str) -> tuple[str, ...]:
    """The index terms of `text` (a query word, a phrase, a page): Whoosh's StandardAnalyzer."""
    return tuple(index_terms(text))


def is_stopped(word: str) -> bool:
    """True for a lower-cased word the index drops: a stop word, or one character."""
    return len(word) < MIN_WORD_CHARS or word in STOP_WORDS


def normalize_text(text: str) -> str:
    """Normalise extracted page text before it is stored and indexed (ligatures, full-width forms)."""
    return unicodedata.normalize("NFKC", text)
