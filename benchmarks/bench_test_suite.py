"""The README test command's time, read from its own output: run `CI=true bash .ci/run > LOG 2>&1`
in a fresh clone (twice in a row for the "same tests pass twice" check), then

    python3 benchmarks/bench_test_suite.py LOG [LOG2 ...] --commit SHA

writes benchmarks/results/test_suite.json: each run's pytest seconds, counts and 25 slowest
tests (pytest's `--durations=25`), against the anchor (the serial suite before issue 34) and the
previous result, whose ratio is reported. Why a parser and not a timer: the number is the one
pytest printed in the command a user runs, not a second measurement of something else.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path
from typing import Any

RESULT = Path(__file__).parent / "results" / "test_suite.json"
ANCHOR = {"what": "the same suite serially before issue 34 (stop 40's CI, 2801 s for the whole command; "
                  "pytest about 42 min on an idle 2-core machine)", "pytest_seconds": 2520}
TARGET = 600
SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in (?P<secs>[\d.]+)s")
DURATION = re.compile(r"^(?P<secs>[\d.]+)s (?P<phase>setup|call|teardown)\s+(?P<test>\S+)")


class BadLog(Exception):
    """A log this script cannot read: one line, exit 2, nothing written."""


def read_log(path: Path) -> dict[str, Any]:
    """One test command's output: pytest's summary line, its durations and the guard rails."""
    if not path.is_file():
        raise BadLog(f"error: {path} is not a file; pass the saved output of `CI=true bash .ci/run > LOG 2>&1`")
    text = path.read_text(encoding="utf-8", errors="replace")
    run: dict[str, Any] = {"log": path.name}
    summaries = [m for line in text.splitlines() if (m := SUMMARY.match(line.strip()))]
    if not summaries:
        raise BadLog(f"error: {path} holds no pytest summary line (did the command reach pytest?); "
                     "pass the whole output of `bash .ci/run`")
    last = summaries[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last.group("body"))}
    run.update(passed=counts.get("passed", 0), skipped=counts.get("skipped", 0),
               failed=counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0),
               pytest_seconds=float(last.group("secs")))
    run["slowest"] = [{"seconds": float(m.group("secs")), "phase": m.group("phase"), "test": m.group("test")}
                      for line in text.splitlines() if (m := DURATION.match(line.strip()))][:25]
    run["guard_rails"] = {"ruff": "ruff check src tests" in text and "Found " not in text.split("mypy src/deskbench")[0],
                          "mypy_strict": "Success: no issues found" in text}
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--workers", type=int, default=3, help="xdist workers the command used (scripts/test.sh: one more than its CPUs)")
    args = ap.parse_args(argv)
    try:
        runs = [read_log(p) for p in args.logs]
    except BadLog as exc:
        print(exc, file=sys.stderr)
        return 2
    previous = json.loads(RESULT.read_text()) if RESULT.exists() else None
    worst = max(r["pytest_seconds"] for r in runs)  # the headline is the slower run
    result = {
        "what": "the README test command (CI=true bash .ci/run) from a fresh clone, 2 cores, idle machine; "
                "runs in a row in the same clone",
        "commit": args.commit, "date": datetime.date.today().isoformat(), "workers": args.workers, "dist": "loadfile",
        "runs": runs,
        "all_green": all(r["failed"] == 0 and r["guard_rails"]["ruff"] and r["guard_rails"]["mypy_strict"] for r in runs),
        "same_tests_each_run": len({(r["passed"], r["skipped"]) for r in runs}) == 1,
        "pytest_seconds": worst,
        "anchor": ANCHOR, "ratio_vs_anchor": round(ANCHOR["pytest_seconds"] / worst, 2),
        "previous": {k: previous[k] for k in ("commit", "pytest_seconds") if previous and k in previous} or None,
        "target_seconds": TARGET, "target_met": all(r["pytest_seconds"] <= TARGET for r in runs),
    }
    if result["previous"]:
        result["ratio_vs_previous"] = round(result["previous"]["pytest_seconds"] / worst, 2)
    RESULT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
