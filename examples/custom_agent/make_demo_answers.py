"""Write demo_answers.jsonl: the scripted model's replies to the bundled demo's 60 questions, for
keyword_agent.py (`--model scripted:examples/custom_agent/demo_answers.jsonl`, no key needed).

Made from the demo's gold answers and evidence pages, with some left wrong on purpose so the
score is a measurement, not 100%: every 6th question has no line (the model call fails, the
episode is an error) and every 4th that has one is answered "not found": 40 of 60 right.

    python examples/custom_agent/make_demo_answers.py [OUT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deskbench.generate.demo import bundled_dir
from deskbench.tracks.docqa.tasks import read_tasks

HERE = Path(__file__).resolve().parent
HEADER = ("# the scripted model's replies to the bundled demo's questions, from make_demo_answers.py: "
          "every 6th question left out, every 4th answered wrong")


def demo_answers() -> str:
    """The file's text: one line per question kept, the reply keyword_agent.py asks for."""
    lines = [HEADER]
    for i, task in enumerate(read_tasks(bundled_dir() / "docqa" / "tasks.jsonl").items):
        if i % 6 == 5:
            continue
        answer = ["not found"] if i % 4 == 3 else list(task.answer_variants[0])
        citations = [{"file": e.document, "page": e.page} for e in task.evidence]
        lines.append(json.dumps({"task": task.id, "question": task.question,
                                 "content": {"answer": answer, "citations": citations}}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "demo_answers.jsonl"
    out.write_text(demo_answers(), encoding="utf-8")
    print(f"wrote {out}")
