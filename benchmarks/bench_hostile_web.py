#!/usr/bin/env python
"""Hostile inputs, web rows (issue 22 item 4 and its 'login' probe): each probe before and after
login throttling, session expiry and the user commands.

Every probe runs the real `deskbench serve` in a subprocess (tests/web/test_hostile_web.py
deskbench_server) on a small corpus made here, and records the wall time and the server's peak RSS
(VmHWM). "before" runs the same probes against another checkout's src/ (--before-src, e.g. a
`git worktree` of the commit before the fix), "after" against this one.

Run: .venv/bin/python benchmarks/bench_hostile_web.py [--before-src /tmp/before/src]
Writes benchmarks/results/hostile_web.json (rows: probe, before, after with verdict, seconds,
peak RSS MB, and the bound); `--rows` prints them as rows of the Hostile inputs table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import write_operator_corpus  # noqa: E402
from hostile_common import Env, markdown_rows, print_rows, run_identity, run_probes  # noqa: E402
from test_hostile_web import deskbench_server, peak_rss_mb, probe_wrong_tokens, try_token  # noqa: E402
from test_web import TASKS  # noqa: E402

Probe = Callable[[Path, Path, Env], dict[str, Any]]
WRONG = 500
CHECKED_BOUND = 10


def cli(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deskbench.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def serve_args(data: Path, run_dir: Path) -> list[str]:
    return ["serve", "--corpus", str(data / "corpus"), "--tasks", str(data / "tasks.jsonl"), "--out", str(run_dir)]


def login(connect: Callable[[], Any], token: str) -> str:
    """The session cookie ('name=value') a right token gets."""
    status, headers = try_token(connect(), token)
    assert status == 303, status
    return next(v.split(";", 1)[0] for v in headers.get_all("set-cookie") if v.startswith("deskbench_session="))


def get_home(connect: Callable[[], Any], cookie: str) -> str:
    conn = connect()
    conn.request("GET", "/", headers={"Cookie": cookie, "Accept": "text/html"})
    resp = conn.getresponse()
    resp.read()
    return f"{resp.status} {resp.headers.get('location', '')}".strip()


def _wrong_tokens(spread: float) -> Probe:
    def probe(data: Path, work: Path, env: Env) -> dict[str, Any]:
        token = cli(env, "serve", "add-user", "carol", "--out", str(work / "run")).stdout.strip()
        with deskbench_server(*serve_args(data, work / "run"), env=env) as (server, connect):
            got = probe_wrong_tokens(connect, WRONG, spread)
            status, headers = try_token(connect(), token)
            peak = peak_rss_mb(server.pid)
        right = f"{status}" + (f" (Retry-After {headers['retry-after']} s)" if status == 429 else "")
        rate = got["checked"] / got["seconds"]
        return {"verdict": f"{got['checked']} of {WRONG} checked ({rate:.0f}/s), {got['throttled']} got 429; "
                           f"the right token next: {right}",
                "seconds": round(got["seconds"], 2), "peak_mb": round(peak, 1),
                "held": got["checked"] < CHECKED_BOUND and got["other"] == 0}
    return probe


def _idle(data: Path, work: Path, env: Env) -> dict[str, Any]:
    """DESKBENCH_SESSION_IDLE=2s (an environment variable, so the code before, which has no such
    option, serves too): a request after 3 s idle."""
    token = cli(env, "serve", "add-user", "dana", "--out", str(work / "run")).stdout.strip()
    started = time.monotonic()
    with deskbench_server(*serve_args(data, work / "run"), env={**env, "DESKBENCH_SESSION_IDLE": "2s"}) \
            as (server, connect):
        cookie = login(connect, token)
        fresh = get_home(connect, cookie)
        time.sleep(3)
        idle = get_home(connect, cookie)
        peak = peak_rss_mb(server.pid)
    return {"verdict": f"fresh: {fresh}; after 3 s idle: {idle}", "seconds": round(time.monotonic() - started, 2),
            "peak_mb": round(peak, 1), "held": fresh == "200" and idle.startswith("303 /login?expired=idle")}


def _user_command(command: str) -> Probe:
    def probe(data: Path, work: Path, env: Env) -> dict[str, Any]:
        token = cli(env, "serve", "add-user", "erin", "--out", str(work / "run")).stdout.strip()
        with deskbench_server(*serve_args(data, work / "run"), env=env) as (server, connect):
            cookie = login(connect, token)
            started = time.monotonic()
            proc = cli(env, "serve", command, "erin", "--out", str(work / "run"))
            seconds = time.monotonic() - started
            after = get_home(connect, cookie)
            old = try_token(connect(), token)[0]
            peak = peak_rss_mb(server.pid)
        said = " ".join(re.sub(r"[\u2500-\u257f]+", " ", proc.stderr).split())  # rich's box drawn round an error
        said = f" ({said[said.index('Error'):][:60]})" if proc.returncode and "Error" in said else ""
        return {"verdict": f"exit {proc.returncode}{said}; the open session next: {after}; the old token: {old}",
                "seconds": round(seconds, 2), "peak_mb": round(peak, 1),
                "held": proc.returncode == 0 and after.startswith("303 /login") and old == 401}
    return probe


PROBES: dict[str, tuple[Probe, str]] = {
    f"login: {WRONG} wrong tokens, as fast as one client goes": (
        _wrong_tokens(0.0), f"< {CHECKED_BOUND} checked, the rest 429 + Retry-After; server peak < 400 MB"),
    f"login: {WRONG} wrong tokens spread over 10 s": (
        _wrong_tokens(10.0), f"< {CHECKED_BOUND} checked in 10 s (back-off 1 s doubling after 5)"),
    "session: a request after 3 s idle (idle limit 2 s)": (
        _idle, "sent back to /login?expired=idle"),
    "serve remove-user while the user is logged in": (
        _user_command("remove-user"), "their open session refused at the next request; the token refused"),
    "serve rotate-token while the user is logged in": (
        _user_command("rotate-token"), "the open session refused at the next request; the old token refused"),
}


def run_all(data: Path, src: Path | None) -> dict[str, dict[str, Any]]:
    return run_probes({name: (lambda tmp, env, probe=probe: probe(data, tmp, env)) for name, (probe, _) in PROBES.items()},
                      src, "bench-hostile-web-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", type=Path, help="src/ of a checkout without the fix")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "hostile_web.json")
    ap.add_argument("--rows", action="store_true", help="only print the docs/benchmarks.md rows of the --out file")
    args = ap.parse_args()
    if args.rows:
        print(markdown_rows(json.loads(args.out.read_text())["rows"]), end="")
        return
    with tempfile.TemporaryDirectory(prefix="bench-hostile-web-data-") as tmp:
        data = Path(tmp)
        write_operator_corpus(data)
        (data / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
        before = run_all(data, args.before_src.resolve()) if args.before_src else {}
        after = run_all(data, None)
    rows = [{"probe": name, "before": before.get(name), "after": after[name], "bound": bound}
            for name, (_, bound) in PROBES.items()]
    result = {**run_identity(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_rows(rows)


if __name__ == "__main__":
    main()
