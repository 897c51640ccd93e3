"""The one text analyzer shared by indexing, query parsing and snippet highlighting.

It indexes the words MADQA's official BM25 tool indexes: Whoosh's default `StandardAnalyzer`
(`TEXT()` field, whoosh 2.7.4) is a RegexTokenizer `\\w+(\\.?\\w+)*`, a LowercaseFilter and a
StopFilter with Whoosh's 34 STOP_WORDS and minsize=2. So here, as there:

- a word is a run of word characters, and single dots between word characters do not split it
  (`3.5`, `U.S.`, `e.g.`, `a.pdf` are one word each) nor do underscores (`total_amount`): deskbench
  joins them with a letter-like character before tantivy's simple tokenizer (the fastest it has)
  sees the text, so the index holds `3ꞏ5` where Whoosh holds `3.5`;
- Whoosh's stop words (STOP_WORDS below: "the", "of", "and", ...) are not indexed and are dropped
  from queries: "the building permit" searches for "building permit";
- words of one character (`a`, `5`, `x`, `é`) are not indexed either (minsize=2).

What deskbench adds, as before: each CJK character is a word of its own (Chinese and Japanese are
written without spaces; those single characters are kept), everything is ASCII-folded after the
stop check (café = cafe) and words over 40 bytes are dropped. One difference is kept on purpose:
Whoosh renumbers positions after dropping a stop word, tantivy keeps the gap, so a phrase
matches the text's own spacing ("Bank of America" matches "Bank of America", as in Whoosh, but
"bank america" as a phrase does not match it, where Whoosh's would).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import tantivy

ANALYZER_NAME = "deskbench_v3"
"""Stored in the index schema: an index built by another analyzer is detected and rebuilt."""
MAX_TOKEN_CHARS = 40

STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "have", "if", "in", "is",
    "it", "may", "not", "of", "on", "or", "tbd", "that", "the", "this", "to", "us", "we", "when",
    "will", "with", "yet", "you", "your",
))
"""whoosh.analysis.STOP_WORDS (whoosh 2.7.4), the official MADQA index's stop list."""
MIN_WORD_CHARS = 2

DOT_JOINER = "\ua78f"  # LATIN LETTER SINOLOGICAL DOT: a letter to tantivy, looks like a dot
UNDERSCORE_JOINER = "\u01c0"  # LATIN LETTER DENTAL CLICK: a letter that looks like a bar

_CJK = "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK_CHAR = re.compile(f"[{_CJK}]")
_INNER_DOT = re.compile(r"\.(?=\w)(?<=\w\.)")  # starts with a literal: the regex engine skips to dots
TOKEN_RE = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])\w)+(?:\.(?:(?![{_CJK}])\w)+)*")
"""Python mirror of the index's words (Whoosh's units, CJK characters apart), used only to locate
words in text for snippets."""


@lru_cache(maxsize=1)
def single_characters() -> tuple[str, ...]:
    """Every one-character word the index could see (lower-cased), CJK aside: they are stop words
    to tantivy, which has no minimum-length filter. The Basic Multilingual Plane only (22 ms):
    page text is NFKC-normalised, which maps the astral letter forms (math alphanumerics) to it."""
    everything = "".join(map(chr, range(0x10000)))
    letters = re.sub(rf"[\W_{_CJK}]+", "", everything)
    return tuple(sorted({c.lower() for c in letters} | {UNDERSCORE_JOINER}))


def build_analyzer(*, stop: bool = True) -> tantivy.TextAnalyzer:
    """The index analyzer; stop=False keeps stop words and single characters (wildcard literals
    and positions are read with it). The stop check runs on lower-cased, unfolded words, as
    Whoosh's does."""
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
    )
    if stop:
        builder = builder.filter(tantivy.Filter.custom_stopword([*STOP_WORDS, *single_characters()]))
    return builder.filter(tantivy.Filter.ascii_fold()).build()


@lru_cache(maxsize=1)
def _analyzers() -> tuple[tantivy.TextAnalyzer, tantivy.TextAnalyzer, tantivy.TextAnalyzer]:
    lower = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
             .filter(tantivy.Filter.lowercase()).build())
    return build_analyzer(), build_analyzer(stop=False), lower


def index_form(text: str) -> str:
    """The text as the index sees it: Whoosh's one-word dots and underscores joined, every CJK
    character set apart as a word of its own."""
    if "." in text:
        text = _INNER_DOT.sub(DOT_JOINER, text)
    if "_" in text:
        text = text.replace("_", UNDERSCORE_JOINER)
    if CJK_CHAR.search(text) is not None:
        text = CJK_CHAR.sub(r" \g<0> ", text)
    return text


def display_form(term: str) -> str:
    """An index term as the text writes it (the joiners back to '.' and '_')."""
    return term.replace(DOT_JOINER, ".").replace(UNDERSCORE_JOINER, "_")


@lru_cache(maxsize=65536)
def analyze(text: str) -> tuple[str, ...]:
    """The index terms of `text`, exactly as tantivy indexes them (stop words dropped)."""
    return tuple(_analyzers()[0].analyze(index_form(text)))


@lru_cache(maxsize=65536)
def analyze_all(text: str) -> tuple[str, ...]:
    """The terms of `text` with stop words and single characters kept (for wildcard literals)."""
    return tuple(_analyzers()[1].analyze(index_form(text)))


def is_stopped(word: str) -> bool:
    """True for a lower-cased word the index drops: a stop word, or one character (not CJK)."""
    return word in STOP_WORDS or (len(word) < MIN_WORD_CHARS and CJK_CHAR.match(word) is None)


@lru_cache(maxsize=65536)
def positioned_terms(text: str) -> tuple[tuple[int, str], ...]:
    """(position, term) for the indexed terms of `text`: positions count the dropped words too,
    as the index's do (tantivy leaves their gap)."""
    full = analyze(text)
    lowered = _analyzers()[2].analyze(index_form(text))
    kept = [i for i, word in enumerate(lowered)
            if not is_stopped(word) and len(word.encode()) < MAX_TOKEN_CHARS]
    if len(kept) != len(full):  # a word the two analyzers split differently: plain positions
        return tuple(enumerate(full))
    return tuple(zip(kept, full, strict=True))


def word_count(text: str) -> int:
    """How many positions `text` takes in the index, dropped words included."""
    return len(_analyzers()[2].analyze(index_form(text)))


def normalize_text(text: str) -> str:
    """Normalise extracted page text before it is stored and indexed (ligatures, full-width forms)."""
    return unicodedata.normalize("NFKC", text)
