"""The RLM agent's prompts: MADQA Prompt 9 as the paper prints it, and the turn messages around it.

Prompt 9 is kept verbatim with one exception: the paper's text extraction opens the example
with a lone ``` line before ```repl (the box of the typeset prompt); that stray fence is left
out because it would leave the model's example unbalanced. "FINAL.VAR" is the paper's spelling
of the RLM library's FINAL_VAR; the agent accepts both.

The other messages follow what the RLM library sends (a description of `context`, a first-turn
safeguard, a reminder of the question every turn) in our own words, plus the structured-output
extraction step of Appendix G.5.
"""

RLM_SYSTEM = """You are tasked with answering a query with associated context. You can access, transform, and analyze this context interactively in a REPL environment that can recursively query sub-LLMs. You will be queried iteratively until you provide a final answer.

REPL Environment Initialization

1. `context`: Variable containing extremely important information. Check its content to understand what you are working with.
2. `llm_query`: Function to query an LLM (handles 500K chars) inside the REPL.
3. `llm_query_batched`: Function to query multiple prompts concurrently.
Signature: `llm_query_batched(prompts: List[str]) -> List[str]`
4. `print()`: Use statements to view REPL output and continue reasoning.

Strategy You will only see truncated outputs from the REPL. Use `llm_query` on variables to analyze semantics. Use variables as buffers to build your answer.

Suggested Workflow:

- Look at `context` and determine a chunking strategy.
- Break context into smart chunks.
- Query sub-LLMs per chunk and save answers to a buffer.
- Query an LLM with all buffers to produce the final answer.

Note: Sub-LLMs fit ~500K characters. You can feed ~10 documents per sub-LLM query.

Execution Format Wrap Python code in triple backticks with `repl` identifier:

```repl
chunk = context[:10000]
answer = llm_query(f"What is the magic number? Chunk: {chunk}")
print(answer)
```

**Final Answer Protocol** When the task is complete, you MUST use one of these functions (do not use code blocks for this):

- `FINAL(your final answer here)`
- `FINAL.VAR(variable_name)`

Think step by step. Plan and execute immediately. Explicitly answer the original query in your final output."""

# The first user message: what `context` is (as the RLM library describes it) and the question
# with the instruction to give source locations (the paper's "answer and source locations").
CONTEXT_NOTE = (
    "Your context is a string with {chars:,} total characters: the text of {documents} PDF "
    "document(s), {pages} page(s) in all. Each document starts with a [FILE: name.pdf] line; each "
    "of its pages sits between [PAGE N] and [END PAGE N] markers (N counts from 1)."
)
QUESTION = (
    "Question: {question}\n\n"
    "Search the documents in `context` for the answer. Your final answer must give the answer "
    "and its source locations: the file name and page number of every page it comes from."
)
FIRST_TURN = (
    "You have not looked at `context` yet: start by examining it in a ```repl``` block rather "
    "than answering straight away."
)
NEXT_TURN = (
    "Above is what the REPL returned. Keep working towards the answer to the question: \"{question}\". "
    "Write ```repl``` blocks to run more code, or give FINAL(...) / FINAL_VAR(variable_name) "
    "outside code blocks when you have the answer."
)
NO_ACTION = "Your reply had no ```repl``` block and no FINAL(...) / FINAL_VAR(...) line."
# The RLM library's `_default_answer` (alexzhang13/rlm rlm/core/rlm.py), asked once the root
# iterations are spent without FINAL; its reply is the raw answer.
DEFAULT_ANSWER = "Please provide a final answer to the user's question based on the information provided."
LAST_TURN = "This is your last turn: give your final answer now with FINAL(...) or FINAL_VAR(...)."
REPL_LOST = (
    "The REPL process {why}; it was restarted, so every variable you had made is gone "
    "(`context`, `llm_query` and `llm_query_batched` are there again)."
)

# Appendix G.5: "The raw RLM response is then processed through a structured output extraction
# step (using the same underlying model) to normalize answers and citations".
EXTRACT_SYSTEM = """You convert a research assistant's final answer to a question about a collection of PDF documents into a JSON object.

Output Format
{"answer": ["answer value 1", "answer value 2", ...], "citations": [{"file": "exact_filename.pdf", "page": 1}]}
Where:
- answer: list of answer values (use as few words as possible, exact document wording preferred); several items -> several elements
- citations: the sources the assistant's answer names, each with the exact PDF filename and page number (1-indexed); an empty list if it names none

Use only what the assistant's answer says; do not add facts of your own."""

EXTRACT_USER = "Question: {question}\n\nThe assistant's final answer:\n{raw}"
