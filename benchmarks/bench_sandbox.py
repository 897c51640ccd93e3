#!/usr/bin/env python
"""Sandbox benchmark: the execute_code round trip, against a plain subprocess in the same run.

Measures, in one run (median of repeats, after one warm-up call each):
1. `Sandbox.run("print(1)")`: a fresh bubblewrap jail, the in-jail supervisor, collection of an
   empty /mnt/result (target: <= 150 ms), vs `subprocess.run([python, "-c", "print(1)"])`.
2. `pandas.read_excel` of a 10,000-row xlsx (generated with openpyxl) bound at /mnt/data,
   vs the same script in a plain subprocess.

Run: .venv/bin/python benchmarks/bench_sandbox.py
Writes benchmarks/results/sandbox.json and the table between the bench:sandbox markers in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from readme_table import update_table

from deskbench.sandbox import Limits, Sandbox

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 150.0
READ_XLSX = "import pandas as pd\ndf = pd.read_excel('{path}')\nprint(len(df), round(df['amount'].sum(), 2))\n"


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: page cache, font cache, bwrap probe
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _xlsx(path: Path, rows: int) -> None:
    import openpyxl

    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("sales")
    ws.append(["id", "region", "product", "amount"])
    for i in range(rows):
        ws.append([i, f"region-{i % 7}", f"product-{i % 31}", round((i * 37 % 1000) / 10, 2)])
    wb.save(path)


def markdown(r: dict[str, Any]) -> str:
    met = "yes" if r["target_met"] else "**no**"
    return "\n".join([
        "| metric | sandbox (ms) | plain subprocess (ms) | ratio | target | met |",
        "|---|--:|--:|--:|---|---|",
        f"| `print(1)` round trip | {r['print_sandbox_ms']:.0f} | {r['print_plain_ms']:.0f} | "
        f"{r['print_sandbox_ms'] / r['print_plain_ms']:.1f}x | <= 150 ms | {met} |",
        f"| pandas read_excel, {r['rows']:,}-row xlsx | {r['xlsx_sandbox_ms']:.0f} | "
        f"{r['xlsx_plain_ms']:.0f} | {r['xlsx_sandbox_ms'] / r['xlsx_plain_ms']:.2f}x | - | - |",
    ])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sandbox.json")
    args = ap.parse_args()
    sandbox = Sandbox(Limits())
    python = sandbox.layout.executable
    with tempfile.TemporaryDirectory() as tmp:
        xlsx = Path(tmp) / "sales.xlsx"
        _xlsx(xlsx, args.rows)
        check = sandbox.run(READ_XLSX.format(path="/mnt/data/sales.xlsx"), inputs=[xlsx])
        assert check.ok and check.stdout.startswith(f"{args.rows} "), check.for_model()
        print_sandbox = _median_ms(lambda: sandbox.run("print(1)"), args.repeats)
        print_plain = _median_ms(lambda: subprocess.run([python, "-c", "print(1)"], capture_output=True,
                                                        check=True), args.repeats)
        reps = max(args.repeats // 3, 3)
        xlsx_sandbox = _median_ms(
            lambda: sandbox.run(READ_XLSX.format(path="/mnt/data/sales.xlsx"), inputs=[xlsx]), reps)
        xlsx_plain = _median_ms(
            lambda: subprocess.run([python, "-c", READ_XLSX.format(path=xlsx)], capture_output=True,
                                   check=True), reps)
    result = {
        "benchmark": "sandbox round trip",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "repeats": args.repeats, "rows": args.rows,
        "print_sandbox_ms": print_sandbox, "print_plain_ms": print_plain,
        "xlsx_sandbox_ms": xlsx_sandbox, "xlsx_plain_ms": xlsx_plain,
        "target_met": print_sandbox <= TARGET_MS,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    print(table)
    update_table("sandbox", f"Run of {result['timestamp'][:10]}, Python {result['machine']['python']}, "
                             f"median of {args.repeats} (xlsx: {reps}) after a warm-up.", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
