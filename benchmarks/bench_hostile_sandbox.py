#!/usr/bin/env python
"""Hostile inputs, sandbox rows (issue 22 item 2): each probe before and after the cgroup per sandbox.

Every probe runs the CLI (or the REPL host) in a subprocess inside a memory cgroup made here
(tests/hostile_sandbox.py run_watched: wall time, and the peak of everything the command and its
sandbox charged, memfd and tmpfs pages included). "before" runs the same probes against another
checkout's src/ (--before-src, e.g. a `git worktree` of the commit before the fix), "after"
against this one.

Run: .venv/bin/python benchmarks/bench_hostile_sandbox.py [--before-src /tmp/before/src]
Writes benchmarks/results/hostile_sandbox.json (rows: probe, before, after with verdict, seconds,
peak RSS MB, and the bound).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hostile_common import Env, print_rows, run_identity, run_probes  # noqa: E402
from hostile_sandbox import (  # noqa: E402
    FORK_4X1100MB,
    FORK_BOMB,
    MEMFD_3GB,
    REPL_1GB,
    REPL_DRIVER,
    cli,
    run_watched,
)

Probe = Callable[[Path, Env], dict[str, Any]]


def _sandbox_probe(code: str, hit: str) -> Probe:
    def probe(work: Path, env: Env) -> dict[str, Any]:
        script = work / "probe.py"
        script.write_text(code)
        w = run_watched(cli("sandbox", "run", str(script), "--json", "--timeout", "60"), env=env, timeout=180)
        try:
            data = json.loads(w.stdout)
        except ValueError:
            return {"verdict": f"no result (exit {w.returncode}): {w.stderr.strip()[-160:]}",
                    "seconds": round(w.seconds, 2), "peak_mb": w.peak_mb, "held": False}
        hits = data.get("limit_hits") or []
        out = data.get("stdout", "").strip().splitlines()
        verdict = (f"limit_hits {hits}" + (f", stdout {out[-1][:60]!r}" if out else "")
                   + (f", {data['enforcement']}" if data.get("enforcement") else ""))
        return {"verdict": verdict, "seconds": round(w.seconds, 2), "peak_mb": w.peak_mb,
                "held": hit in hits}
    return probe


def _repl_probe(work: Path, env: Env) -> dict[str, Any]:
    host_tmp = work / "host-tmp"
    host_tmp.mkdir()
    w = run_watched([sys.executable, "-c", REPL_DRIVER, str(host_tmp)],
                    env={**env, "TMPDIR": str(host_tmp)}, stdin=REPL_1GB, timeout=180)
    try:
        out = json.loads(w.stdout)
    except ValueError:
        return {"verdict": f"no result: {w.stderr.strip()[-160:]}", "seconds": round(w.seconds, 2),
                "peak_mb": w.peak_mb, "held": False}
    tmp_mb = round(out["tmp_bytes"] / 1024**2, 1)
    err = [line for line in out["stderr"].splitlines() if "Error" in line][-1:]
    verdict = (f"host TMPDIR +{tmp_mb} MB while the REPL lived; "
               + (f"the code got {err[0].strip()[:60]}" if out["error"] and err else "no error")
               + ("; the model is told the caps" if "[sandbox] a write failed" in out["stderr"] else ""))
    return {"verdict": verdict, "seconds": round(w.seconds, 2), "peak_mb": w.peak_mb,
            "held": tmp_mb < 1 and out["error"]}


def _leftovers_probe(work: Path, env: Env) -> dict[str, Any]:
    """An rlm episode through `deskbench run` (scripted fake model) with TMPDIR empty."""
    from conftest import ingest, write_text_pdf
    from fake_openai import FakeOpenAI

    write_text_pdf(work / "pdfs" / "fleet.pdf", ["Winter season rates: Mountain car."])
    ingest(work / "corpus", [work / "pdfs"])
    tasks = work / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "q1", "question": "Which vehicle?", "answer_variants": [["Mountain car"]],
                                 "evidence": [{"document": "fleet.pdf", "page": 1}]}) + "\n")
    host_tmp = work / "host-tmp"
    host_tmp.mkdir()
    replies = ["```repl\nfound = context[context.find('Mountain'):][:12]\nprint(found)\n```", "FINAL_VAR(found)"]

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if body.get("response_format"):
            return {"kind": "text", "text": json.dumps({"answer": ["Mountain car"],
                                                        "citations": [{"file": "fleet.pdf", "page": 1}]})}
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return {"kind": "text", "text": replies[min(turn, 1)]}

    with FakeOpenAI(script=script) as fake:
        w = run_watched(cli("run", "--tasks", str(tasks), "--corpus", str(work / "corpus"), "--agent", "rlm",
                            "--model", f"openai-compat/fake@{fake.base_url}", "--out", str(work / "run"),
                            "--json", "--quiet"), env={**env, "TMPDIR": str(host_tmp)}, timeout=180)
    left = sorted(p.name.rsplit("-", 1)[0] for p in host_tmp.iterdir())
    return {"verdict": f"exit {w.returncode}; left in TMPDIR: {left or 'nothing'}",
            "seconds": round(w.seconds, 2), "peak_mb": w.peak_mb, "held": w.returncode == 0 and not left}


def _kill9_probe(work: Path, env: Env) -> dict[str, Any]:
    """kill -9 of `sandbox run` mid-call, then one more sandbox use in a new process."""
    host_tmp = work / "host-tmp"
    host_tmp.mkdir()
    run_env = {**os.environ, **env, "TMPDIR": str(host_tmp)}
    (work / "sleep.py").write_text("import time\ntime.sleep(60)\n")
    (work / "hi.py").write_text("print('hi')\n")
    proc = subprocess.Popen(cli("sandbox", "run", str(work / "sleep.py")), env=run_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(host_tmp.glob("deskbench-call-*")):
        time.sleep(0.05)
    time.sleep(0.5)
    proc.kill()
    proc.wait()
    after_kill = len(list(host_tmp.glob("deskbench-*")))
    w = run_watched(cli("sandbox", "run", str(work / "hi.py")), env={**env, "TMPDIR": str(host_tmp)}, timeout=120)
    left = len(list(host_tmp.glob("deskbench-*")))
    return {"verdict": f"{after_kill} deskbench-* folder(s) after kill -9; {left} after the next sandbox use",
            "seconds": round(w.seconds, 2), "peak_mb": w.peak_mb, "held": left == 0}


PROBES: dict[str, tuple[Probe, str]] = {
    "sandbox: 3 GB held through memfd_create (2 GiB limit)":
        (_sandbox_probe(MEMFD_3GB, "memory"), "killed and 'memory' in limit_hits; < 60 s; peak < 2 GiB + 300 MB"),
    "sandbox: four forked children of 1.1 GB (2 GiB limit)":
        (_sandbox_probe(FORK_4X1100MB, "memory"), "killed and 'memory' in limit_hits; < 60 s; peak < 2 GiB + 300 MB"),
    "sandbox: fork bomb that swallows its errors (128 processes)":
        (_sandbox_probe(FORK_BOMB, "processes"), "'processes' in limit_hits; < 30 s; peak < 1 GiB"),
    "rlm REPL: 1 GB written to /mnt/result":
        (_repl_probe, "stopped at 256 MB with a clear error; host TMPDIR + < 1 MB; < 60 s"),
    "temp folders: one rlm run":
        (_leftovers_probe, "no deskbench-* folder left in TMPDIR"),
    "temp folders: kill -9 mid-call, then the next sandbox use":
        (_kill9_probe, "the dead process's folders removed by the next use"),
}


def run_all(src: Path | None) -> dict[str, dict[str, Any]]:
    return run_probes({name: probe for name, (probe, _) in PROBES.items()}, src)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", type=Path, help="src/ of a checkout without the fix")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "hostile_sandbox.json")
    args = ap.parse_args()
    before = run_all(args.before_src.resolve()) if args.before_src else {}
    after = run_all(None)
    rows = [{"probe": name, "before": before.get(name), "after": after[name], "bound": bound}
            for name, (_, bound) in PROBES.items()]
    result = {**run_identity(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_rows(rows)


if __name__ == "__main__":
    main()
