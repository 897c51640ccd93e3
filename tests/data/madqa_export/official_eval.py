"""Runs the official MADQA evaluator (eval/evaluate.py, eval/metrics.py of github OxRML/MADQA) on
predictions files and prints, as one JSON object, what it printed: its text output and its --json
output, with ANLS* and with --semantic. Run by generate.py beside it, in a Python environment that
has the official eval/requirements.txt (anls-star, numpy; scipy for the interval), never by the
test suite:

    python official_eval.py EVAL_DIR TASKS.jsonl PARITY_GENERATE.py FILE.jsonl...

EVAL_DIR holds the official evaluate.py and metrics.py as they are. Two things are replaced, as
for tests/data/madqa_parity: `datasets.load_dataset` returns the rows of TASKS.jsonl (no hub),
and `metrics._call_llm_judge` answers with `_verdict` of the parity generator (no Gemini; a
verdict "error" is the official judge's error result, score 0)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import sys
import types
from pathlib import Path
from typing import Any


def main() -> None:
    eval_dir, tasks, parity, *files = sys.argv[1:]
    gold = [json.loads(line) for line in Path(tasks).read_text(encoding="utf-8").splitlines() if line.strip()]
    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda name, split=None: gold  # type: ignore[attr-defined]
    sys.modules["datasets"] = fake
    spec = importlib.util.spec_from_file_location("madqa_parity_generate", parity)
    assert spec is not None and spec.loader is not None
    parity_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parity_module)
    sys.path.insert(0, eval_dir)
    metrics = importlib.import_module("metrics")
    evaluate = importlib.import_module("evaluate")
    asked: dict[str, str] = {}

    def scripted(question: str, predicted: Any, gold_variants: Any, **_: Any) -> dict[str, Any]:
        verdict = parity_module._verdict(question, predicted)
        asked[json.dumps([question, predicted], ensure_ascii=False)] = verdict
        if verdict == "error":
            return {"judgment": "error", "main_issue": "error", "explanation": "scripted failure", "score": 0.0}
        return {"judgment": verdict, "main_issue": "none", "explanation": "scripted",
                "score": {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}[verdict]}

    metrics._call_llm_judge = scripted
    printed: dict[str, str] = {}
    as_json: dict[str, Any] = {}
    for mode, flags in (("anls", []), ("semantic", ["--semantic"])):
        for json_flag in (False, True):
            sys.argv = ["evaluate.py", *files, "--by-category", "--by-domain", *flags, *(["--json"] if json_flag else [])]
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                evaluate.main()
            text = buffer.getvalue()
            if json_flag:
                as_json[mode] = json.loads(text[text.index("\n{") + 1: text.rindex("}") + 1])
            else:
                printed[mode] = text
    import anls_star
    import numpy
    import scipy

    versions = {"python": sys.version.split()[0], "numpy": numpy.__version__, "scipy": scipy.__version__,
                "anls_star": getattr(anls_star, "__version__", "?")}
    print(json.dumps({"printed": printed, "json": as_json, "judge": dict(sorted(asked.items())),
                      "versions": versions}, ensure_ascii=False))


if __name__ == "__main__":
    main()
