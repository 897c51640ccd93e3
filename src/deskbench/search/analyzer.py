"""The one text analyzer shared by indexing, query parsing and snippet highlighting.

Words are runs of letters, marks and digits; each CJK character is a word of its own, so Chinese
and Japanese text (written without spaces) is searchable by characters and phrases. Everything is
lowercased and ASCII-folded (café = cafe), which makes search case- and accent-insensitive.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import tantivy

ANALYZER_NAME = "deskbench_v1"

_CJK_RUST = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
TOKEN_PATTERN_RUST = rf"[{_CJK_RUST}]|[\p{{L}}\p{{M}}\p{{N}}]+"

_CJK_PY = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
TOKEN_RE = re.compile(rf"[{_CJK_PY}]|[^\W_]+")
"""Python mirror of TOKEN_PATTERN_RUST, used only to locate words in text for snippets."""

MAX_TOKEN_CHARS = 40


def build_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN_RUST))
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


_ANALYZER = build_analyzer()


@lru_cache(maxsize=65536)
def analyze(text: str) -> tuple[str, ...]:
    """The index terms of `text`, exactly as tantivy indexes them."""
    return tuple(_ANALYZER.analyze(text))


def normalize_text(text: str) -> str:
    """Normalise extracted page text before it is stored and indexed (ligatures, full-width forms)."""
    return unicodedata.normalize("NFKC", text)
