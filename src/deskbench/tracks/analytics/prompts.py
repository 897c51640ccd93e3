"""AIDABench's task-execution prompt (Appendix A, Listing 1), as the paper gives it.

`{task_prompt}` is filled with the task's instruction followed by what deskbench adds so a model
can act on it: where the input files are, where output files go, and (unless the ablation
switch is off) the auxiliary spreadsheet summary of Appendix F.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deskbench.tracks.analytics.tasks import AnalyticsTask

ANALYST_PROMPT = """You are a data analysis assistant. You will complete the given task by analyzing a file.

The current task is:
{task_prompt}
Never forget this task!

### Note: The overall task may be very complex!
Please split the task into multiple sub-tasks, then execute them step by step, and finally
complete the task.

Below are some important tips that may help you solve the task:

#### <tips>
- You need to continuously run code via tool calls until the task is completed. However, you
  must return the final result within {max_rounds} rounds; otherwise you will exceed the round limit
  and trigger an exception!
- You do not need to install new Python packages; the environment already has the required
  packages installed.
- If one approach fails, try another. A correct answer exists!
- When the question mentions "the N-th column", use code to verify the actual position of the
  N-th column.
- Each tool call runs in a fresh sandbox environment. This means you must write complete code
  each time, including all necessary imports.
- Always verify that your final answer is correct!
- If you encounter errors, try debugging your code.
- Carefully consider whether the task requires deduplication (removing duplicates).
- If you see paths like /mnt/data or /mnt/result, they are virtual paths and will be replaced at
  runtime. Therefore, do not try to inspect files using a bare "mnt/" path, because "mnt/"
  alone will not be recognized/replaced and may cause errors.
- If a tool call fails, or the code does not run correctly, do NOT assume the returned result is
  correct and continue reasoning based on it.
  The correct approach is to analyze the error cause and try to fix it.
- If your obtained result does not satisfy the task, keep analyzing and iterating until your
  final answer satisfies all requirements.
"""

FILES_HEADER = "Input files (read-only):"
OUTPUT_NOTE = ("Save any file the task asks for under /mnt/result/ (for a chart, save the figure "
               "as a PNG there). When you are done, reply with your final answer without a tool call.")
SUMMARY_HEADER = "Auxiliary spreadsheet summary (JSON, per workbook):"


def task_prompt(task: AnalyticsTask, inputs: list[Path], *, summary: bool) -> str:
    """The instruction, where its files are, and the auxiliary summary (unless ablated)."""
    lines = [task.instruction, "", FILES_HEADER]
    lines += [f"- /mnt/data/{p.name}" for p in inputs]
    lines += ["", OUTPUT_NOTE]
    if summary:
        from deskbench.corpus.sheet_summary import summarise

        text = summarise(inputs)
        if text:
            lines += ["", SUMMARY_HEADER, text]
    return "\n".join(lines)
