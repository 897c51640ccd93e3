"""The semtools-agent's texts: MADQA's Prompt 8 (the user prompt and CLAUDE.md, Appendix G.4, as
the paper prints them), a short stand-in for the Claude Agent SDK's `claude_code` system prompt
preset (that preset ships inside the Claude Code CLI and is not reproduced here: this one names
the same tools and says how the loop ends), and the four tools' definitions (the SDK's tool names
and input fields; descriptions in deskbench's words)."""

from __future__ import annotations

from deskbench.models.types import ToolSpec

USER_PROMPT = """Try to answer the question based on the PDFs at {pdf_path}. All of them have been converted to Markdown and can be found at {markdown_path}.

Question: {question}

Provide the answer along with citations (file names and page number) and the search queries you used."""

CLAUDE_MD = """# Environment Setup
Use uv alongside the virtual environment when running Python scripts. When requiring environment variables, use:

```
uv run --env-file keys.env main.py
```

# Augmented CLI Tooling
If executing bash commands, you have three very helpful utilities installed:

- **parse:** Converts any non-grep-able format into markdown. Outputs a filepath for a converted markdown file for every input file to stdin.
- **search:** Performs a search using static embeddings (similar to grep). Works best with keyword-based queries. Only works with text-based files (requires parse first for PDFs).
- **workspace:** Management for accelerating search over large collections.

## 1. Parse CLI

```
parse [OPTIONS] <FILES>...
```

Options:

- -c, --parse-config <PATH> Path to config file
- -b, --backend <BACKEND> Backend type (default: llama-parse)

## 2. Search CLI

```
search [OPTIONS] <QUERY> [FILES]...
```

Options:

- -n, --n-lines <N> Lines context [default: 3] (Suggest: 30-50)
- --top-k <K> Top-k files/texts [default: 3]
- -m, --max-distance <D> Return results below distance threshold
- -i, --ignore-case Case-insensitive search

## 3. Workspace CLI

```
workspace <COMMAND>
```

Commands:

- use Use or create a workspace
- status Show active workspace and stats
- prune Remove stale files

## Common Usage Patterns

```
# Parse a PDF and search for specific content
parse document.pdf | xargs cat | search "error handling"

# Search with custom context and thresholds
search "machine learning" *.txt --n-lines 5 --max-distance 0.3

# Create/Use a workspace (caches embeddings)
workspace use my-workspace
export SEMTOOLS_WORKSPACE=my-workspace
search "some keywords" ./large_dir/*.txt --n-lines 5 --top-k 10
```

# Evaluation Rules
Verbose answers score POORLY. Answer format rules:

- answer: A list of SHORT strings with ONLY essential info.
- NO full sentences. NO explanations.
- Always return a list, even for single answers (e.g., ["$1.2M"]).
- Use EXACT words from the document when possible.
- NEVER include phrases like "According to...", "The document states...".

## Examples: Correct vs Incorrect

Q: Federal housing laws protect people from discrimination on the basis of what?

[WRONG] Federal housing laws protect people from discrimination on the basis of race, color...

[CORRECT] ["race", "color", "religion", ...]

Q: What was the total live weight of sheep?

[WRONG] The total live weight ... was 2,400 cwt.

[CORRECT] ["2,400 cwt"]

# Expected Output Format
You only need to return the "answer" and "citations".

```
{
  "id": "test/0",
  "question": "What is the total revenue?",
  "answer": ["$1.2M"],
  "citations": [
    {"document": "report.pdf", "page": 5}
  ],
  "search_history": ["query1", "query2"]
}
```
"""

SYSTEM = """You are an agent that answers questions about a collection of documents on a Linux machine. \
You work through tools: Bash (a shell whose working directory and exported variables persist between \
calls), Read (read a text file with line numbers), Glob (find files by name pattern) and Grep (search \
file contents with a regular expression). Call as many tools as you need, one step at a time, and read \
their results before deciding what to do next. When you are done, reply without calling a tool: that \
reply is your final answer.

The project's instructions (CLAUDE.md in the working directory {cwd}) follow.

Contents of {cwd}/CLAUDE.md (project instructions):

{claude_md}"""

REPAIR = ("Your final reply could not be read ({problem}). Reply with only the JSON object "
          '{{"answer": [...], "citations": [{{"document": ..., "page": ...}}], "search_history": [...]}}.')

LAST_TURN = ("This is your last step: reply now, without calling a tool, with the JSON answer "
             "(answer, citations, search_history) from what you have found.")

TOOLS = [
    ToolSpec(name="Bash", description=(
        "Run a bash command in a persistent shell (the working directory and exported variables carry over "
        "to the next call). The parse, search and workspace commands are installed (see CLAUDE.md). "
        "timeout is in milliseconds (default 120000, at most 600000). Output longer than 30000 characters "
        "is cut. Quote paths that contain spaces."),
        parameters={"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"},
            "description": {"type": "string", "description": "What the command does, in 5-10 words"},
        }, "required": ["command"]}),
    ToolSpec(name="Read", description=(
        "Read a text file by its absolute path. Lines come numbered as `cat -n` prints them; at most 2000 "
        "lines from `offset` (a 1-based line number) unless `limit` says otherwise; lines longer than 2000 "
        "characters are cut."),
        parameters={"type": "object", "properties": {
            "file_path": {"type": "string", "description": "The absolute path of the file to read"},
            "offset": {"type": "number", "description": "The line number to start reading from"},
            "limit": {"type": "number", "description": "The number of lines to read"},
        }, "required": ["file_path"]}),
    ToolSpec(name="Glob", description=(
        "Find files whose path matches a glob pattern (\"**/*.md\", \"*.pdf\"), newest first, at most 100."),
        parameters={"type": "object", "properties": {
            "pattern": {"type": "string", "description": "The glob pattern to match files against"},
            "path": {"type": "string", "description": "The directory to search in (default: the working directory)"},
        }, "required": ["pattern"]}),
    ToolSpec(name="Grep", description=(
        "Search file contents with a regular expression. output_mode: \"files_with_matches\" (default) lists "
        "the files, \"content\" shows matching lines (with -A/-B/-C context and -n line numbers), \"count\" "
        "counts matches per file. Filter files with glob (\"*.md\") or type (\"md\", \"txt\")."),
        parameters={"type": "object", "properties": {
            "pattern": {"type": "string", "description": "The regular expression to search for"},
            "path": {"type": "string", "description": "A file or directory to search (default: the working directory)"},
            "glob": {"type": "string", "description": "Only files matching this glob"},
            "type": {"type": "string", "description": "Only files of this type (md, txt, py, ...)"},
            "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
            "-i": {"type": "boolean", "description": "Case-insensitive search"},
            "-n": {"type": "boolean", "description": "Show line numbers (content mode)"},
            "-A": {"type": "number", "description": "Lines to show after each match (content mode)"},
            "-B": {"type": "number", "description": "Lines to show before each match (content mode)"},
            "-C": {"type": "number", "description": "Lines to show before and after each match (content mode)"},
            "head_limit": {"type": "number", "description": "Show only the first N entries"},
            "multiline": {"type": "boolean", "description": "Let . and patterns span lines"},
        }, "required": ["pattern"]}),
]
