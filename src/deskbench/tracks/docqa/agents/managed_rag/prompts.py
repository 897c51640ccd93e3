"""What the official managed-RAG scripts send, and how they read the reply (github OxRML/MADQA
978fa76de16acf983363557823f4f2d1ed74ba47).

The paper's Prompt 6 ("Managed RAG prompt", Appendix G.2) is the Gemini script's text. The OpenAI
script sends a shorter IMPORTANT line ("Search carefully." without "using different terms if
needed") as the assistant's `instructions`, and the question alone as the user message; the Gemini
script sends its prompt and the question as one user turn. Each agent sends its own script's text:
the code is what the name means (docs/managed-rag.md)."""

from __future__ import annotations

import json
import re
from typing import Any

# baselines/openai-file-search/openai_file_search_agent.py, get_or_create_assistant: `instructions`
OPENAI_INSTRUCTIONS = """You are a document QA assistant with access to a file search tool.
The file search tool retrieves relevant content from a collection of PDF documents.

IMPORTANT: The answer to the question is definitely in the documents. Search carefully.

When you have the answer, respond with a JSON object in this exact format:
{
  "answer": ["answer value 1", "answer value 2", ...],
  "citations": [
    {"file": "exact_filename.pdf", "page": 1},
    {"file": "another_file.pdf", "page": 3}
  ]
}

Where:
- answer: list of answer values (use as few words as possible, exact document wording preferred)
- citations: list of sources with exact PDF filename and page number"""

# baselines/gemini-file-search/gemini_file_search_agent.py, answer_question: `system_prompt`
# (the paper's Prompt 6), sent as f"{GEMINI_PROMPT}\n\nQuestion: {question}"
GEMINI_PROMPT = """You are a document QA assistant with access to a file search tool.
The file search tool retrieves relevant content from a collection of PDF documents.

IMPORTANT: The answer to the question is definitely in the documents. Search carefully using different terms if needed.

When you have the answer, respond with a JSON object in this exact format:
{
  "answer": ["answer value 1", "answer value 2", ...],
  "citations": [
    {"file": "exact_filename.pdf", "page": 1},
    {"file": "another_file.pdf", "page": 3}
  ]
}

Where:
- answer: list of answer values (use as few words as possible, exact document wording preferred)
- citations: list of sources with exact PDF filename and page number
"""


def gemini_contents(question: str) -> str:
    """The Gemini script's one user turn."""
    return f"{GEMINI_PROMPT}\n\nQuestion: {question}"


# both scripts' _parse_answer: the widest {...} holding "answer" then "citations"
_ANSWER_JSON = re.compile(r'\{[\s\S]*"answer"[\s\S]*"citations"[\s\S]*\}')


def official_parse(text: str) -> tuple[dict[str, Any], bool]:
    """The reply read as both scripts' `_parse_answer` reads it: the JSON object when it parses
    and has both keys (as written: the answer may be a string, the citations anything), else the
    whole text, stripped, as the one answer and no citations. The flag says which."""
    match = _ANSWER_JSON.search(text)
    if match:
        try:
            parsed = json.loads(match.group(0))
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and "answer" in parsed and "citations" in parsed:
            return parsed, True
    return {"answer": [text.strip()], "citations": []}, False
