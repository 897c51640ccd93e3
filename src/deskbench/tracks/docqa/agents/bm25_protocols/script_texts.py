"""The official scripts' own strings (github OxRML/MADQA baselines/bm25-mllm-agent/<provider>_agent.py),
those two or more scripts share, given one home here because the scripts share them. Each script's
module builds its texts from these and keeps the ones only it sends; the requests are checked
against the scripts' recorded ones (tests/test_official_requests_*.py), character for character.
"""

from __future__ import annotations

from deskbench.models.types import ToolSpec
from deskbench.tracks.docqa.agents.prompts import SEARCH_DESCRIPTION

PROMPT_OPENING = """You are a document QA assistant with access to a search tool.
The search tool returns images of document pages.

IMPORTANT: The answer to the question is definitely in the documents. If your search returns no results or unhelpful pages, try different search terms. Be creative with queries - use synonyms, abbreviations, or different phrasings.

Once you find relevant pages, analyze the images carefully"""
"""How every script's system prompt (gemini_agent.py: its instruction) begins."""

ANSWER_FIELDS = """- answer: list of answer values (one or more items)
  * if there is a single answer, the output should be a one-element list
  * if the answer refers to multiple items or entities, the list will have several elements
  * do not write a full sentence there, use as few words as possible
  * if possible, use the exact words from the document
- citations: list of sources where EACH citation must have:
  * file: the exact PDF filename shown in the image (e.g., "1007969.pdf", "doc_name.pdf")
  * page: the page number (integer)"""
"""Every script's description of the answer and its citations."""

TOOL_PROMPT = f"{PROMPT_OPENING}. When you have the answer, use the provide_answer tool with:\n{ANSWER_FIELDS}"
"""The system prompt of the scripts with a provide_answer tool (anthropic_agent.py, vllm_agent.py),
up to the last paragraph each adds."""

QUERY_DESCRIPTION = "Search query using keywords, phrases in quotes, and boolean operators"
"""The search tool's "query" parameter description."""

SEARCH_TOOL = ToolSpec(
    name="search_documents",
    description=SEARCH_DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": QUERY_DESCRIPTION},
        },
        "required": ["query"],
    },
)
"""The search tool of anthropic_agent.py, vllm_agent.py and gemini_agent.py (openai_agent.py's is strict)."""

ANSWER_TOOL = ToolSpec(
    name="provide_answer",
    description="Provide the final structured answer with citations after analyzing the document pages.",
    parameters={
        "type": "object",
        "properties": {
            "answer": {"type": "array", "items": {"type": "string"},
                       "description": "List of answer values (one or more items)"},
            "citations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "description": "The exact PDF filename (e.g., '1007969.pdf')"},
                        "page": {"type": "integer", "description": "The page number"},
                    },
                    "required": ["file", "page"],
                },
                "description": "List of citations with file and page information",
            },
        },
        "required": ["answer", "citations"],
    },
)
"""The provide_answer tool of anthropic_agent.py and vllm_agent.py."""

FOUND = "Found {n} matching pages."
"""A search's tool result (gemini_agent.py adds a sentence)."""
PAGE_LABEL = "\nFile: {file}, Page: {page}"
"""The text before each page image (openai_agent.py puts "[Image] " before "File")."""
PAGES_HEADER = "Here are the matching pages:\n"
"""The start of the user message with the pages (openai_agent.py, vllm_agent.py)."""
LIMIT_ANSWER = "Maximum iterations reached without answer"
"""The answer after the last iteration without one (anthropic_agent.py, vllm_agent.py)."""
