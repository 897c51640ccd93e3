"""The deliverables agent's prompt (consulting DRA paper, §3.2-3.4).

The paper sends each package's SME-authored prompt, with its corpus-discipline annotation
(closed, hybrid or open) prepended as an instruction (§3.2), to deep-research agents that read
the input files and write the deliverable, producing output files by running code they write.
That is the default here: the task's `full_prompt` (discipline line, authorized external
sources, the SME prompt) and then only the mechanics of this harness (the `execute_code` tool,
where the files are, where outputs go, which reply is the deliverable). The files are mounted
read-only and their normalised text (xlsx as annotated TSV, docx/pptx/pdf as text, as the
paper's infrastructure normalises them) is inlined up to a budget.

The agent is told nothing about the traps: naming them ("averages that must be weighted",
"footnotes that override") would inflate trap avoidance, V, EP and DI over the paper's agents.
`--trap-hints` adds them back (the prompt deskbench used before), one hint per trap kind of the
package taxonomy; the run records it and the system is named `deliverable-agent[trap-hints]`.
"""

from deskbench.tracks.deliverables.tasks import TrapKind

DELIVERABLE_PROMPT = """{preamble}THE TASK
{task_prompt}

{files_block}
HOW TO WORK
- Use the execute_code tool to read the files and run your calculations; each call runs a fresh
  Python process (write complete code with its imports). {budget}
{web_lines}- Save every required output file under /mnt/result/ with exactly the name the task gives.
- When you are done, reply WITHOUT a tool call. That reply is the deliverable itself, in markdown{closing}.
"""

BUDGET = "You have at most {max_rounds} calls."
WEB_BUDGET = "You have at most {max_rounds} tool calls in all (execute_code, web_search and fetch)."
WEB_LINES = ("- web_search finds pages on the web (titles, URLs, snippets); fetch returns a page's text "
             "by URL.\n")

TRAP_HINTS: dict[TrapKind, str] = {
    "footnote_override": "footnotes that override a headline number",
    "unit_mismatch": "inconsistent units",
    "stale_placeholder": "stale or placeholder values",
    "unweighted_average": "averages that must be weighted",
    "date_format": "non-standard date formats",
    "misnamed_item": "misnamed products or line items",
    "default_assumption": "default assumptions the files rule out",
}
"""One hint per trap kind (tasks/deliverables.TrapKind; "other" has no wording), --trap-hints only."""

TRAP_PREAMBLE = ("You are a management consultant preparing a client deliverable. Work only from\n"
                 "the evidence you are allowed to use, check every figure, and watch for traps in the "
                 "source files:\n{hints}.\n\n")
TRAP_CLOSING = (": the sections the task asks for, each figure next to its label, the assumptions you "
                "made, and any mandated final line written exactly as the task words it")

OUTPUTS_HEADER = "Required output files (save them under /mnt/result/):"
INPUTS_HEADER = "Input files (read-only, under /mnt/data/):"
INLINE_HEADER = "Their contents, normalised to text (spreadsheets as annotated TSV):"
TRUNCATED = "[... truncated: read the file with execute_code for the rest]"
FINAL_NOTE = ("The {what} budget ({max_rounds} calls) is spent: no more {runs}. Write the final "
              "deliverable now, in markdown, from what you have found, without a tool call.")
FINAL_WORDS = {False: {"what": "execute_code", "runs": "code runs"},
               True: {"what": "tool-call", "runs": "code runs or web calls"}}  # keyed by web on
