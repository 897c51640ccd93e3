"""What a managed-RAG store costs besides the model's tokens, from the providers' published prices
(as of models/prices.py's PRICES_AS_OF; the model's tokens are priced by the run's price table).

OpenAI (https://platform.openai.com/docs/pricing, "Built-in tools"): file search storage $0.10 per
GB of vector-store storage per day, the first GB free (per account, so not subtracted here); file
search tool calls $2.50 per 1,000 are billed on the Responses API only: the Assistants API, which
the official script uses, bills the retrieved chunks as the run's input tokens.
Gemini (https://ai.google.dev/gemini-api/docs/file-search#pricing): indexing is billed as
embeddings, $0.15 per million tokens, once, when a file is imported; storage and query-time
embeddings are free; retrieved chunks are billed as the request's input tokens."""

from __future__ import annotations

OPENAI_STORAGE_USD_PER_GB_DAY = 0.10
OPENAI_FILE_SEARCH_CALL_USD = 0.0  # Assistants API: no per-call fee (Responses API: $0.0025)
GEMINI_INDEXING_USD_PER_MTOK = 0.15
GEMINI_STORAGE_USD_PER_GB_DAY = 0.0


def openai_storage_per_day(usage_bytes: int) -> float:
    """USD a day for a vector store of `usage_bytes` (before the account's free first GB)."""
    return usage_bytes / 1e9 * OPENAI_STORAGE_USD_PER_GB_DAY
