#!/usr/bin/env python
"""CLI start-up benchmark: the CPU time `deskbench` spends before it prints anything.

Measures, in one run, the user+sys CPU seconds of child processes (getrusage(RUSAGE_CHILDREN)
around each one, so a busy machine's other work is not counted, only how it slows ours):
1. The anchor: `python -c pass`, the interpreter's own start-up, with the same interpreter.
2. `deskbench --version`, `deskbench --help` and `deskbench run --help` (the console script;
   help rendered at COLUMNS=100, TERM=dumb). Target: <= 0.3 s of CPU for `--version` and `--help`
   (median over the repeats); `run --help` is reported beside them (no target).
The cases run interleaved, one of each per round, so a change in load touches all of them alike.
The ratio is each command's median over the anchor's. One `-X importtime` run of `--help` adds
the slowest top-level imports and checks that no model SDK, numpy, pandas, matplotlib, pydantic
or track module is imported (the test suite checks the same, without a clock).

Run: .venv/bin/python benchmarks/bench_cli_startup.py [--repeats 20]
Writes benchmarks/results/cli_startup.json and the table between the bench:cli_startup markers
in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from readme_table import update_table

REPO = Path(__file__).resolve().parents[1]
TARGET_CPU_SECONDS = 0.3
TARGETED = ("--version", "--help")
NOT_AT_START = ("openai", "anthropic", "pandas", "numpy", "matplotlib", "pydantic", "deskbench.models.openai_chat",
                "deskbench.tracks")


def deskbench_command() -> list[str]:
    """The console script next to this interpreter (what a user runs), else `python -m deskbench`."""
    script = Path(sys.executable).parent / "deskbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "deskbench"]


def cases() -> dict[str, list[str]]:
    cli = deskbench_command()
    return {"python -c pass": [sys.executable, "-c", "pass"], "--version": [*cli, "--version"],
            "--help": [*cli, "--help"], "run --help": [*cli, "run", "--help"]}


def child_env() -> dict[str, str]:
    """A fixed terminal; bytecode written as an installed package has it (the warm-up run writes
    it), so a stale or missing .pyc never counts as start-up."""
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cpu_and_wall(argv: list[str]) -> tuple[float, float]:
    """One child process: its user+sys CPU seconds and its wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def import_profile(argv: list[str]) -> dict[str, Any]:
    """`-X importtime` of one `--help`: the slowest top-level imports and the modules that must wait."""
    cli_module = [sys.executable, "-X", "importtime", "-m", "deskbench", *argv[1:]]
    proc = subprocess.run(cli_module, check=True, capture_output=True, text=True, env=child_env())
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        rows.append((name.rstrip(), int(cumulative)))
    imported = {name.strip() for name, _ in rows}
    top = sorted(((n.strip(), us) for n, us in rows if len(n) - len(n.lstrip()) <= 3), key=lambda r: -r[1])[:8]
    return {"modules": len(imported), "top_level_ms": {n: round(us / 1000, 1) for n, us in top},
            "imported_that_should_wait": sorted(m for m in imported
                                                if any(m == p or m.startswith(p + ".") for p in NOT_AT_START))}


def source_sha() -> str:
    digest = hashlib.sha256()
    for path in sorted((REPO / "src" / "deskbench").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def markdown(r: dict[str, Any]) -> str:
    rows = ["| command | CPU s (median) | CPU s (min) | wall s (median) | x `python -c pass` | target | met |",
            "|---|--:|--:|--:|--:|---|---|"]
    for name, m in r["cases"].items():
        target = f"<= {TARGET_CPU_SECONDS} s" if name in TARGETED else "-"
        met = ("yes" if m["cpu_median"] <= TARGET_CPU_SECONDS else "**no**") if name in TARGETED else "-"
        rows.append(f"| `{name}` | {m['cpu_median']:.3f} | {m['cpu_min']:.3f} | {m['wall_median']:.3f} | "
                    f"{m['ratio_to_anchor']:.1f} | {target} | {met} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=20, help="rounds (one child of each case per round)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cli_startup.json")
    args = ap.parse_args()
    todo = cases()
    for argv in todo.values():  # warm the file cache and the .pyc files before timing
        subprocess.run(argv, check=True, capture_output=True, env=child_env())
    load_before = os.getloadavg()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
    for _ in range(args.repeats):
        for name, argv in todo.items():
            samples[name].append(cpu_and_wall(argv))
    load_after = os.getloadavg()
    anchor = statistics.median(cpu for cpu, _ in samples["python -c pass"])
    measured = {}
    for name, got in samples.items():
        cpu = [c for c, _ in got]
        measured[name] = {"cpu_median": statistics.median(cpu), "cpu_min": min(cpu), "cpu_max": max(cpu),
                          "wall_median": statistics.median(w for _, w in got),
                          "ratio_to_anchor": statistics.median(cpu) / anchor if anchor > 0 else float("inf"),
                          "argv": todo[name]}
    result = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_average_before": load_before, "load_average_after": load_after},
        "versions": {p: importlib.metadata.version(p) for p in ("typer", "click", "rich", "pydantic")},
        "source_sha256": source_sha(),
        "command": deskbench_command(),
        "repeats": args.repeats,
        "target_cpu_seconds": TARGET_CPU_SECONDS,
        "cases": measured,
        "imports_of_help": import_profile(todo["--help"]),
        "target_met": all(measured[n]["cpu_median"] <= TARGET_CPU_SECONDS for n in TARGETED),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    print(table)
    print(f"imports of --help: {result['imports_of_help']}")
    update_table("cli_startup", f"Run of {result['timestamp'][:10]}, Python {result['machine']['python']}, "
                 f"{args.repeats} rounds, load average {load_before[0]:.1f} before and {load_after[0]:.1f} after:",
                 table, page=REPO / "benchmarks" / "README.md")
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
