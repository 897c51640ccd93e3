"""The deliverables agent's prompt (consulting DRA paper, §3.2-3.4).

The paper sends each package's prompt, with its corpus discipline prepended, to deep-research
agents that read the input files and write the deliverable, producing output files by running
code they write. This prompt asks the same of any chat model with an `execute_code` tool: the
files are mounted read-only, their normalised text (xlsx as annotated TSV, docx/pptx/pdf as
text, as the paper's infrastructure normalises them) is inlined up to a budget, and the final
reply without a tool call is the deliverable the client reads.
"""

DELIVERABLE_PROMPT = """You are a management consultant preparing a client deliverable. Work only from
the evidence you are allowed to use, check every figure, and watch for traps in the source files:
footnotes that override a headline number, inconsistent units, stale or placeholder values,
averages that must be weighted, and non-standard date formats.

THE TASK
{task_prompt}

{files_block}
HOW TO WORK
- Use the execute_code tool to read the files and compute every number; each call runs a fresh
  Python process (write complete code with its imports). You have at most {max_rounds} calls.
- Save every required output file under /mnt/result/ with exactly the name the task gives.
- When you are done, reply WITHOUT a tool call. That reply is the deliverable itself, in markdown:
  the sections the task asks for, each figure next to its label, the assumptions you made, and any
  mandated final line written exactly as the task words it.
"""

OUTPUTS_HEADER = "Required output files (save them under /mnt/result/):"
INPUTS_HEADER = "Input files (read-only, under /mnt/data/):"
INLINE_HEADER = "Their contents, normalised to text (spreadsheets as annotated TSV):"
TRUNCATED = "[... truncated: read the file with execute_code for the rest]"
FINAL_NOTE = ("The execute_code budget ({max_rounds} calls) is spent: no more code runs. Write the final "
              "deliverable now, in markdown, from what you have found, without a tool call.")
