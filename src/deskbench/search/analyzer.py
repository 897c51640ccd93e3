"""The one text analyzer shared by indexing, query parsing and snippet highlighting.

Words are runs of letters and digits (tantivy's simple tokenizer, the fastest it has); each CJK
character is made a word of its own by spacing it out before tokenizing, so Chinese and Japanese
text (written without spaces) is searchable by characters and phrases. Everything is lowercased
and ASCII-folded (café = cafe): search is case- and accent-insensitive.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import tantivy

ANALYZER_NAME = "deskbench_v2"
MAX_TOKEN_CHARS = 40

_CJK = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
TOKEN_RE = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+")
"""Python mirror of the index tokenizer, used only to locate words in text for snippets."""


def build_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


_ANALYZER = build_analyzer()


def index_form(text: str) -> str:
    """The text as the index sees it: every CJK character set apart as a word of its own."""
    if _CJK_CHAR.search(text) is None:
        return text
    return _CJK_CHAR.sub(r" \g<0> ", text)


@lru_cache(maxsize=65536)
def analyze(text: str) -> tuple[str, ...]:
    """The index terms of `text`, exactly as tantivy indexes them."""
    return tuple(_ANALYZER.analyze(index_form(text)))


def normalize_text(text: str) -> str:
    """Normalise extracted page text before it is stored and indexed (ligatures, full-width forms)."""
    return unicodedata.normalize("NFKC", text)
