#!/usr/bin/env python
"""Hostile inputs, forged-episode rows (issue 33, "No forged episode"): each probe of the issue's
table before and after.

Every probe runs as an attacker on the same machine would: the real CLI (`python -m deskbench.cli`:
`deskbench mcp`, `run`, `view`, `import`, ...) in subprocesses, the official `mcp` client library in
another (the attacker knows only the server's port; its owner has the URL the server printed, or
$DESKBENCH_MCP_URL), and small `python -c` scripts where a function is the thing probed (the
deliverables fetch guard). A probe observes outcomes, not messages: HTTP status, exit code, whether
the attacker's answer was stored, whether the password appears in the run folder, peak RSS, a
traceback or not. Seconds are the probe's wall time; peak MB the largest RSS of any process it
started (the CLI or server and its children, the client), sampled every 20 ms.

"before" runs the same probes against another checkout's src/ (--before-src, e.g.
`git archive 72d3efb src | tar -x -C /work/before33`), "after" against this one; `--only before` or
`--only after` runs one side and keeps the other from the --out file.

Run: .venv/bin/python benchmarks/bench_hostile_forge.py [--before-src /work/before33/src] [--only after]
Writes benchmarks/results/hostile_forge.json (rows: probe, before, after with verdict, seconds, peak
RSS MB, held, and the bound); `--rows` prints them as rows of the Hostile inputs table in
docs/benchmarks.md, `--docs` writes them there (after the other benchmarks' rows).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from bench_hostile_store import GUESS, guess_run, model_env, tasks_file  # noqa: E402
from conftest import write_text_pdf  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from hostile_common import Env, markdown_rows, print_rows, run_identity  # noqa: E402
from hostile_watch import Bounded, TreeWatch, bounded, kill_tree  # noqa: E402
from http_double import LocalJsonServer  # noqa: E402
from test_hostile_web import deskbench_server, peak_rss_mb, try_token  # noqa: E402

Probe = Callable[[Path, Env], dict[str, Any]]
PREFIX = "forge: "  # every row of this benchmark starts so (how --docs finds its own rows)
PASSWORD = "secret7319"  # the password of the --url probe, looked for in everything the run keeps or shows
DOCS = {"harbour.pdf": ["Harbour authority staff list, spring edition.", "The harbour master is Ingrid Solberg."],
        "fleet.pdf": ["The flagship vessel is Nordkapp, built in 1998.", "Crew rota for the fleet."]}
QUESTION = {"id": "q1", "question": "Who is the harbour master?", "answer_variants": [["Ingrid"]],
            "evidence": [{"document": "harbour.pdf", "page": 2}]}
ATTACK_PATHS = ("/mcp", "/")  # where a client that knows only the port looks (FastMCP's default path, the root)

# The MCP client the probes run as a separate process (the official library only, no deskbench
# import, as an attacker's or a user's agent would): argv[1] is a JSON plan, stdout one JSON line.
CLIENT = r'''
import asyncio, json, os, sys, time

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def text_of(res):
    return " ".join(getattr(c, "text", None) or f"<{c.type}>" for c in res.content)


async def call(session, name, args):
    try:
        res = await session.call_tool(name, args)
        return {"tool": name, "error": bool(res.isError), "text": text_of(res)[:300], "types": [c.type for c in res.content]}
    except Exception as exc:
        return {"tool": name, "error": True, "text": f"{type(exc).__name__}: {exc}"[:300], "types": []}


async def calls(session, plan):
    """Each (name, args, repeat[, at once]) in turn: `repeat` calls one after another, or all at once."""
    out = []
    for name, args, repeat, *at_once in plan:
        if at_once and at_once[0]:
            out += await asyncio.gather(*(call(session, name, args) for _ in range(repeat)))
        else:
            for _ in range(repeat):
                out.append(await call(session, name, args))
    return out


async def over_http(url, plan):
    async with streamablehttp_client(url) as (r, w, _), ClientSession(r, w) as s:
        await s.initialize()
        return await calls(s, plan)


async def two(url, a_first, b, a_last):
    """Client A and client B: two MCP sessions on one server, B's call between A's two."""
    async with streamablehttp_client(url) as (r, w, _), ClientSession(r, w) as a:
        await a.initialize()
        first = await calls(a, [a_first])
        try:
            middle = await asyncio.wait_for(over_http(url, [b]), 20)
        except BaseException as exc:
            middle = [{"tool": b[0], "error": True, "text": f"{type(exc).__name__}: {exc}"[:300], "types": []}]
        last = await calls(a, [a_last])
        return first + middle + last


async def over_stdio(command, args, env, plan):
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        return await calls(s, plan)


def listening(pid):
    """The 127.0.0.1 ports a process tree listens on, as any process of the same user sees them (/proc)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    ports = set()
    for p in procs:
        try:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN and c.laddr.ip in ("127.0.0.1", "::1"):
                    ports.add(c.laddr.port)
        except psutil.Error:
            pass
    return ports


async def hunt(pid, paths, plan, seconds):
    """Find the episode's port in /proc and answer on it before the agent does."""
    import psutil

    deadline, tried, log = time.monotonic() + seconds, {}, []
    def alive():
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    while time.monotonic() < deadline and alive():
        for port in sorted(listening(pid)):
            for path in paths:
                key = (port, path)
                if tried.get(key, 0) >= 3:
                    continue
                tried[key] = tried.get(key, 0) + 1
                url = f"http://127.0.0.1:{port}{path}"
                try:
                    results = await asyncio.wait_for(over_http(url, plan), 10)
                    return {"connected": True, "url": url, "results": results, "tried": log}
                except BaseException as exc:
                    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                        exc = exc.exceptions[0]
                    log.append(f"{path}: {type(exc).__name__}: {str(exc).split(' for url')[0]}"[:100])
        await asyncio.sleep(0.05)
    return {"connected": False, "results": [], "tried": log[-6:]}


async def main(plan):
    mode = plan["mode"]
    if mode == "hunt":
        return await hunt(plan["pid"], plan["paths"], plan["calls"], plan["seconds"])
    try:
        if mode == "http":
            results = await over_http(plan["url"], plan["calls"])
        elif mode == "two":
            results = await two(plan["url"], plan["a_first"], plan["b"], plan["a_last"])
        else:
            results = await over_stdio(plan["command"], plan["args"], plan["env"], plan["calls"])
    except BaseException as exc:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        return {"connected": False, "results": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"connected": True, "results": results}


plan = json.loads(sys.argv[1])
try:
    result = asyncio.run(asyncio.wait_for(main(plan), plan.get("timeout", 60)))
except BaseException as exc:
    result = {"connected": False, "results": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
print(json.dumps(result), flush=True)
'''

# The external agent of the run probe: the owner of $DESKBENCH_MCP_URL, slower than the attacker.
AGENT = r'''
import asyncio, os, sys, time

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main():
    async with streamablehttp_client(os.environ["DESKBENCH_MCP_URL"]) as (r, w, _), ClientSession(r, w) as s:
        await s.initialize()
        await s.call_tool("provide_answer", {"answer": ["legit answer"], "citations": []})


time.sleep(float(sys.argv[1]))
asyncio.run(main())
'''

# The deliverables fetch guard, found at run time (LiveWeb's default `blocked`, else a function
# by one of the names it may have), asked about each address; and the fetch itself, with every
# connection the event loop would make recorded and refused (no packet leaves the machine).
FETCH_GUARD = r'''
import asyncio, asyncio.base_events, asyncio.selector_events, inspect, ipaddress, json, sys, types
import deskbench.tracks.deliverables.web_live as m

cls = getattr(m, "LiveWeb", None) or next(c for c in vars(m).values() if inspect.isclass(c)
                                        and c.__module__ == m.__name__ and hasattr(c, "fetch"))
guard, name = None, None
try:
    p = inspect.signature(cls.__init__).parameters.get("blocked")
    if p is not None and callable(p.default):
        guard, name = p.default, p.default.__name__
except (TypeError, ValueError):
    pass
for n in ("private_address", "blocked_address", "not_global", "non_global", "is_blocked", "blocked", "refused"):
    if guard is None and callable(getattr(m, n, None)):
        guard, name = getattr(m, n), n

attempts = []


async def no_connect(self, *args, **kwargs):
    attempts.append(repr(args[1:] or kwargs)[:80])
    raise ConnectionRefusedError(111, "probe: the connection was not made")


asyncio.selector_events.BaseSelectorEventLoop.sock_connect = no_connect
asyncio.base_events.BaseEventLoop.create_connection = no_connect


async def fetch(url):
    web = cls(types.SimpleNamespace(name="probe"), timeout=5)
    try:
        await web.fetch(url)
        return "fetched"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:160]
    finally:
        close = getattr(web, "aclose", None)
        if close is not None:
            await close()


out = {"guard": name}
for ip, url in json.loads(sys.argv[1]):
    verdict = None
    if guard is not None:
        for arg in (ipaddress.ip_address(ip), ip):
            try:
                verdict = bool(guard(arg))
                break
            except Exception:
                continue
    before = len(attempts)
    said = asyncio.run(fetch(url))
    out[ip] = {"blocked": verdict, "connect_attempted": len(attempts) > before, "fetch": said}
print(json.dumps(out))
'''


# -- running and watching ------------------------------------------------------------------------


def _limit_as(mb: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mb * 2**20, mb * 2**20))
    return limit


def watched(argv: list[str], env: Env, *, kill_after: float = 120.0, kill_rss_mb: float = 4096.0,
            limit_as_mb: int | None = None, stdin: int | None = subprocess.DEVNULL) -> Bounded:
    """`argv` as tests/hostile_watch.py bounds it; killed past `kill_after` s or `kill_rss_mb`
    (tree) so a probe cannot take the machine, its address space capped when asked."""
    return bounded(argv, kill_after=kill_after, env=env, kill_rss_mb=kill_rss_mb, stdin=stdin,
                   preexec_fn=_limit_as(limit_as_mb) if limit_as_mb else None)


def cli(env: Env, *args: str, **kw: Any) -> Bounded:
    return watched([sys.executable, "-m", "deskbench.cli", *args], env, **kw)


def client(plan: dict[str, Any], env: Env | None = None) -> tuple[dict[str, Any], Bounded]:
    """The MCP client (CLIENT) run once with `plan`: (its JSON answer, the run)."""
    run = watched([sys.executable, "-c", CLIENT, json.dumps(plan)], env or {}, kill_after=plan.get("timeout", 60) + 30)
    try:
        return json.loads(run.stdout.strip().splitlines()[-1]), run
    except (ValueError, IndexError):
        return {"connected": False, "results": [], "error": f"client exit {run.returncode}: {run.stderr[-300:]}"}, run


class Server:
    """A long-running command (an MCP server) with its tree's RSS sampled until stopped; its stdout
    read line by line (the URL it prints)."""

    def __init__(self, argv: list[str], env: Env) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, errors="replace", env={**os.environ, **env})
        self.watch = TreeWatch(self.proc.pid)
        self.lines: list[str] = []
        self.stderr = ""
        self._stop = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._sample, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.watch.sample()
            time.sleep(0.02)

    def url(self, seconds: float = 60.0) -> str:
        """The URL the server printed ("... at http://127.0.0.1:PORT/...")."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in self.lines:
                found = re.search(r"https?://127\.0\.0\.1:\d+[^\s;,'\"]*", line)
                if found:
                    return found.group(0).rstrip(".")
            if self.proc.poll() is not None:
                time.sleep(0.2)
                raise RuntimeError(f"the server exited {self.proc.returncode}: {self.stderr[-300:]}")
            time.sleep(0.05)
        raise RuntimeError("the server printed no URL")

    def stop(self) -> float:
        """Stop it (SIGTERM, then kill); the peak RSS of its tree."""
        self._stop.set()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            kill_tree(self.watch.root)
            self.proc.wait(10)
        return self.watch.peak


@contextlib.contextmanager
def mcp_server(env: Env, *args: str) -> Iterator[Server]:
    server = Server([sys.executable, "-m", "deskbench.cli", "mcp", *args, "--transport", "http",
                     "--port", str(free_port())], env)
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raw_status(port: int, path: str) -> int:
    """The HTTP status of an MCP initialize POSTed to 127.0.0.1:PORT/PATH without anything else."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json",
                                                        "Accept": "application/json, text/event-stream"})
        resp = conn.getresponse()
        resp.read(2000)
        return resp.status
    except OSError:
        return -1
    finally:
        conn.close()


def port_of(url: str) -> int:
    found = re.search(r":(\d+)", url.split("//", 1)[1])
    assert found, url
    return int(found.group(1))


def ok_calls(answer: dict[str, Any], tool: str | None = None) -> int:
    return sum(1 for r in answer.get("results", []) if not r["error"] and (tool is None or r["tool"] == tool))


def episodes(run: Path, system: str | None = None) -> list[dict[str, Any]]:
    """The run's stored episodes as rows (status, submission and trajectory as stored text)."""
    db = run / "run.sqlite"
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode(errors="replace")
    try:
        rows = con.execute("SELECT task_id, system, attempt, status, error, submission, trajectory FROM episodes").fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()
    keys = ("task_id", "system", "attempt", "status", "error", "submission", "trajectory")
    return [dict(zip(keys, r, strict=True)) for r in rows if system is None or r[1] == system]


def answer_of(ep: dict[str, Any]) -> Any:
    try:
        return json.loads(ep["submission"] or "null").get("answer")
    except (ValueError, AttributeError):
        return None


def tail(run: Bounded) -> str:
    """How a command ended, in a few words: exit code, traceback or not, stderr lines, its last line."""
    lines = run.stderr.strip().splitlines()
    last = lines[-1][:160] if lines else ""
    tb = ", traceback" if "Traceback" in run.stderr else ""
    killed = ", stopped by the bench" if run.killed else ""
    return f"exit {run.returncode}{tb}{killed}, {len(lines)} stderr line(s)" + (f": {last}" if last else "")


def row(verdict: str, held: bool, seconds: float, peak: float) -> dict[str, Any]:
    return {"verdict": verdict, "held": held, "seconds": round(seconds, 2), "peak_mb": round(peak, 1)}


def ingest(tmp: Path, env: Env) -> Path:
    for name, pages in DOCS.items():
        write_text_pdf(tmp / "pdfs" / name, pages)
    subprocess.run([sys.executable, "-m", "deskbench.cli", "ingest", str(tmp / "pdfs"), "--corpus", str(tmp / "corpus"),
                    "--quiet"], check=True, env={**os.environ, **env}, capture_output=True, timeout=300)
    return tmp / "corpus"


def docqa_answer(text: str) -> dict[str, Any]:
    return {"answer": [text], "citations": [{"file": "harbour.pdf", "page": 2}]}


# -- MCP probes (item 1) -------------------------------------------------------------------------


def probe_mcp_no_token(tmp: Path, env: Env) -> dict[str, Any]:
    """The attacker knows the port only: a raw initialize, then the mcp client calling
    provide_answer 20 times; the owner (the printed URL) answers once, then sends 100 get_page calls
    at once (the rate limit)."""
    corpus = ingest(tmp, env)
    out = tmp / "served"
    started = time.monotonic()
    with mcp_server(env, "--corpus", str(corpus), "--out", str(out), "--question", "Who is the harbour master?") as server:
        url = server.url()
        port = port_of(url)
        statuses = {path: raw_status(port, path) for path in ATTACK_PATHS}
        attacks = [client({"mode": "http", "url": f"http://127.0.0.1:{port}{path}", "timeout": 30,
                           "calls": [["provide_answer", docqa_answer("attacker answer"), 20]]}) for path in ATTACK_PATHS]
        owner, owner_run = client({"mode": "http", "url": url, "timeout": 30,
                                   "calls": [["provide_answer", docqa_answer("owner answer"), 1]]})
        flood_started = time.monotonic()
        flood, flood_run = client({"mode": "http", "url": url, "timeout": 90,
                                   "calls": [["get_page", {"file": "harbour.pdf", "page": 1, "view": "text"}, 100, True],
                                             ["provide_answer", docqa_answer("flood"), 1]]})
        flood_seconds = time.monotonic() - flood_started
        time.sleep(0.3)
        stored = episodes(out)
        peak = max(server.stop(), owner_run.peak_rss_mb, flood_run.peak_rss_mb, *(r.peak_rss_mb for _, r in attacks))
    by_attacker = sum("attacker answer" in (ep["submission"] or "") for ep in stored)
    by_owner = sum("owner answer" in (ep["submission"] or "") for ep in stored)
    attacker_ok = sum(ok_calls(a) for a, _ in attacks)
    held = by_attacker == 0 and attacker_ok == 0 and all(s != 200 for s in statuses.values()) and by_owner == 1
    shown = ", ".join(f"{p} {s}" for p, s in statuses.items())
    verdict = (f"port only: initialize {shown}; {attacker_ok} of 40 attacker calls answered, {by_attacker} episodes "
               f"stored; the printed URL: {by_owner} stored; 100 get_page calls at once on it ({flood_seconds:.1f} s): "
               f"{100 - ok_calls(flood, 'get_page')} refused")
    return row(verdict, held, time.monotonic() - started, peak)


def probe_mcp_two_clients(tmp: Path, env: Env) -> dict[str, Any]:
    """Client A searches, client B (a second session on the same URL) answers, then A answers."""
    corpus = ingest(tmp, env)
    out = tmp / "served"
    started = time.monotonic()
    with mcp_server(env, "--corpus", str(corpus), "--out", str(out)) as server:
        url = server.url()
        got, run = client({"mode": "two", "url": url, "timeout": 60,
                           "a_first": ["search_documents", {"query": "victim private search"}, 1],
                           "b": ["provide_answer", docqa_answer("attacker answer"), 1],
                           "a_last": ["provide_answer", docqa_answer("victim answer"), 1]})
        time.sleep(0.3)
        stored = episodes(out)
        peak = max(server.stop(), run.peak_rss_mb)
    victims = [ep for ep in stored if "victim private search" in ep["trajectory"]]
    mixed = [ep for ep in victims if "attacker answer" in (ep["submission"] or "")]
    own = [ep for ep in victims if "victim answer" in (ep["submission"] or "")]
    shown = "; ".join(f"{ep['task_id']}: {answer_of(ep)} over the victim's search" for ep in victims) or "no episode holds A's search"
    apart = [ep["task_id"] for ep in stored if "attacker answer" in (ep["submission"] or "") and ep not in victims]
    verdict = f"{shown}; B's answer " + (f"stored as its own episode {', '.join(apart)}" if apart else
                                         "in A's episode" if mixed else "refused") + (
        f" ({got['error']})" if got.get("error") else "")
    return row(verdict, not mixed and len(own) == 1, time.monotonic() - started, peak)


def probe_external_race(tmp: Path, env: Env) -> dict[str, Any]:
    """`run --agent external`: the agent answers after 4 s; a second process finds the episode's
    port in /proc (the run's listening sockets) and answers the gold answer first."""
    corpus = ingest(tmp, env)
    tasks = tmp / "tasks.jsonl"
    tasks.write_text(json.dumps(QUESTION) + "\n")
    (tmp / "agent.py").write_text(AGENT)
    out = tmp / "run"
    started = time.monotonic()
    run = Server([sys.executable, "-m", "deskbench.cli", "run", "--agent", "external", "--command",
                  f"{sys.executable} {tmp / 'agent.py'} 4", "--tasks", str(tasks), "--corpus", str(corpus),
                  "--out", str(out), "--quiet"], env)
    hunt, hunt_run = client({"mode": "hunt", "pid": run.proc.pid, "paths": list(ATTACK_PATHS), "seconds": 25,
                             "timeout": 40, "calls": [["provide_answer", docqa_answer("Ingrid"), 1]]})
    try:
        run.proc.wait(120)
    except subprocess.TimeoutExpired:
        pass
    peak = max(run.stop(), hunt_run.peak_rss_mb)
    stored = episodes(out, "external")
    ep = stored[0] if stored else None
    answer = answer_of(ep) if ep else None
    attacked = ok_calls(hunt, "provide_answer") > 0
    where = f"the attacker found {hunt['url']} and answered" if attacked else (
        f"the attacker's calls refused ({', '.join(hunt.get('tried', [])[-2:]) or 'no port found'})")
    gold = " (the gold answer)" if answer == ["Ingrid"] else ""
    stored_text = f"stored {ep['status']} with {answer}{gold}" if ep else f"nothing stored (run exit {run.proc.returncode})"
    held = ep is not None and answer == ["legit answer"] and not attacked
    return row(f"{where}; {stored_text}", held, time.monotonic() - started, peak)


def analytics_tasks(tmp: Path, env: Env) -> Path:
    code = ("import sys; from pathlib import Path; from deskbench.tracks.analytics.generate.tasks import generate_analytics; "
            "generate_analytics(Path(sys.argv[1]), tasks=1, seed=5)")
    subprocess.run([sys.executable, "-c", code, str(tmp / "gen")], check=True, env={**os.environ, **env},
                   capture_output=True, timeout=300)
    return tmp / "gen" / "tasks.jsonl"


def probe_mcp_execute_code(tmp: Path, env: Env) -> dict[str, Any]:
    """`deskbench mcp --tasks` (analytics): a client that knows the port calls execute_code and
    provide_answer; the owner (the printed URL) calls execute_code."""
    tasks = analytics_tasks(tmp, env)
    out = tmp / "served"
    started = time.monotonic()
    with mcp_server(env, "--tasks", str(tasks), "--out", str(out)) as server:
        url = server.url()
        port = port_of(url)
        plan = [["execute_code", {"code": "print(6 * 7)"}, 1], ["provide_answer", {"answer": "42"}, 1]]
        attacks = [client({"mode": "http", "url": f"http://127.0.0.1:{port}{path}", "timeout": 90, "calls": plan})
                   for path in ATTACK_PATHS]
        owner, owner_run = client({"mode": "http", "url": url, "timeout": 90,
                                   "calls": [["execute_code", {"code": "print(6 * 7)"}, 1]]})
        time.sleep(0.3)
        stored = episodes(out)
        peak = max(server.stop(), owner_run.peak_rss_mb, *(r.peak_rss_mb for _, r in attacks))
    ran = sum(1 for a, _ in attacks for r in a["results"] if r["tool"] == "execute_code" and not r["error"] and "42" in r["text"])
    owner_ran = any(r["tool"] == "execute_code" and not r["error"] and "42" in r["text"] for r in owner["results"])
    verdict = (f"port only: execute_code ran {ran} time(s), {len(stored)} episode(s) stored"
               f"{' (' + str([ep['status'] for ep in stored]) + ')' if stored else ''}; the printed URL: execute_code "
               f"{'ran' if owner_ran else 'did not run'}")
    return row(verdict, ran == 0 and not stored and owner_ran, time.monotonic() - started, peak)


# -- fetch guard (item 2) ------------------------------------------------------------------------

GUARDED = [("100.100.100.200", "http://100.100.100.200/latest/meta-data/"),
           ("2002:a9fe:a9fe::1", "http://[2002:a9fe:a9fe::1]/latest/meta-data/"),
           ("fec0::1", "http://[fec0::1]/")]


def probe_fetch_guard(tmp: Path, env: Env) -> dict[str, Any]:
    run = watched([sys.executable, "-c", FETCH_GUARD, json.dumps(GUARDED)], env)
    if run.returncode:
        return row(f"probe script {tail(run)}", False, run.seconds, run.peak_rss_mb)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    parts = [f"{ip}: blocked={got[ip]['blocked']}, fetch {'connects' if got[ip]['connect_attempted'] else 'refused'}"
             for ip, _ in GUARDED]
    held = all(got[ip]["blocked"] is True and not got[ip]["connect_attempted"] for ip, _ in GUARDED)
    return row(f"{got['guard']}: " + "; ".join(parts), held, run.seconds, run.peak_rss_mb)


# -- containment (item 3) ------------------------------------------------------------------------


def probe_get_page_outside(tmp: Path, env: Env) -> dict[str, Any]:
    """harbour.pdf's row in pages.sqlite points at ../outside/secret.pdf; get_page over MCP (stdio)."""
    corpus = ingest(tmp, env)
    write_text_pdf(tmp / "outside" / "secret.pdf", ["OUTSIDE THE CORPUS", "page two outside"])
    con = sqlite3.connect(corpus / "pages.sqlite")
    con.execute("UPDATE documents SET stored_path = '../outside/secret.pdf' WHERE doc_id = 'harbour.pdf'")
    con.commit()
    con.close()
    got, run = client({"mode": "stdio", "command": sys.executable, "timeout": 90, "env": env,
                       "args": ["-m", "deskbench.cli", "mcp", "--corpus", str(corpus), "--out", str(tmp / "served"),
                                "--transport", "stdio"],
                       "calls": [["get_page", {"file": "harbour.pdf", "page": 1, "view": "image"}, 1]]})
    if not got["results"]:
        return row(f"client: {got.get('error')}", False, run.seconds, run.peak_rss_mb)
    (res,) = got["results"]
    served = not res["error"] and "image" in res["types"]
    verdict = (f"the page rendered from outside the corpus and returned ({res['types']})" if served
               else f"refused (isError={res['error']}): {res['text'].replace(str(tmp) + '/', '')[:120]}")
    return row(verdict, res["error"] and "image" not in res["types"], run.seconds, run.peak_rss_mb)


def login(connect: Callable[[], Any], token: str) -> str:
    status, headers = try_token(connect(), token)
    assert status == 303, status
    return next(v.split(";", 1)[0] for v in headers.get_all("set-cookie") if v.startswith("deskbench_session="))


def get(connect: Callable[[], Any], cookie: str, path: str) -> tuple[int, bytes]:
    conn = connect()
    conn.request("GET", path, headers={"Cookie": cookie, "Accept": "text/html"})
    resp = conn.getresponse()
    return resp.status, resp.read()


@contextlib.contextmanager
def viewer(env: Env, run: Path) -> Iterator[tuple[Any, Callable[[], Any], str]]:
    token = subprocess.run([sys.executable, "-m", "deskbench.cli", "serve", "add-user", "carol", "--out", str(run)],
                           capture_output=True, text=True, env={**os.environ, **env}, timeout=120).stdout.strip()
    with deskbench_server("view", str(run), env=env) as (server, connect):
        yield server, connect, login(connect, token)


def probe_output_files_dir(tmp: Path, env: Env) -> dict[str, Any]:
    """An analytics episode writes out.csv; its stored submission is then given files_dir '.' and
    the file's name 'run.sqlite'; the viewer's /output is asked for that file."""
    tasks = analytics_tasks(tmp, env)

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        if any(m["role"] == "tool" for m in body["messages"]):
            return {"kind": "text", "text": "done"}
        return {"kind": "tool", "name": "execute_code",
                "arguments": json.dumps({"code": "open('/mnt/result/out.csv', 'w').write('a,b\\n1,2\\n')"})}

    out = tmp / "run"
    with FakeOpenAI(script=script) as fake:
        made = cli({**env, "OPENAI_API_KEY": "sk-test"}, "run", "--agent", "analyst-agent", "--tasks", str(tasks),
                   "--out", str(out), "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1", "--quiet")
    (ep,) = episodes(out)
    sub = json.loads(ep["submission"])
    if made.returncode or not sub.get("files"):
        return row(f"the analytics run made no output file ({tail(made)})", False, made.seconds, made.peak_rss_mb)
    sub["files_dir"] = "."
    sub["files"][0]["name"] = "run.sqlite"
    con = sqlite3.connect(out / "run.sqlite")
    con.execute("UPDATE episodes SET submission = ? WHERE task_id = ?", (json.dumps(sub), ep["task_id"]))
    con.commit()
    con.close()
    started = time.monotonic()
    with viewer(env, out) as (server, connect, cookie):
        query = urlencode({"run": out.name, "system": ep["system"], "task": ep["task_id"], "attempt": 0, "n": 0})
        status, body = get(connect, cookie, f"/output?{query}")
        peak = peak_rss_mb(server.pid)
    sqlite_served = status == 200 and body.startswith(b"SQLite format 3")
    verdict = f"HTTP {status}" + (f": run.sqlite served as the episode's file ({len(body):,} bytes)" if sqlite_served
                                  else f": {body[:80].decode(errors='replace').strip()}")
    return row(verdict, not sqlite_served, time.monotonic() - started, peak)


def guess_store(tmp: Path, env: Env, n: int = 30) -> Path:
    tasks = tasks_file(tmp / "tasks.jsonl", [f"q{i}" for i in range(n)])
    with FakeOpenAI(script=lambda b, k: GUESS) as fake:
        subprocess.run([sys.executable, "-m", "deskbench.cli", *guess_run(tasks, tmp / "run")], check=True,
                       env={**os.environ, **model_env(env, fake, tmp)}, capture_output=True, timeout=300)
    return tmp / "run"


# -- the store, one row at a time (item 4) -------------------------------------------------------

BAD = {"q0": "usage input_tokens: inf", "q1": "a 100,000-deep trajectory", "q2": "submission not UTF-8"}


def probe_malformed_row(tmp: Path, env: Env) -> dict[str, Any]:
    """30 guess episodes, three of them malformed (BAD); the viewer's table, score, diagnose and
    export (madqa) over the run."""
    run = guess_store(tmp, env)
    con = sqlite3.connect(run / "run.sqlite")
    usage = json.loads(con.execute("SELECT usage FROM episodes WHERE task_id = 'q0'").fetchone()[0])
    usage["input_tokens"] = float("inf")
    con.execute("UPDATE episodes SET usage = ? WHERE task_id = 'q0'", (json.dumps(usage),))  # Infinity, as json writes it
    con.execute("UPDATE episodes SET trajectory = ? WHERE task_id = 'q1'", ("[" * 100_000 + "]" * 100_000,))
    con.execute("UPDATE episodes SET submission = CAST(X'7B22616E73776572223A205B22FF"
                "FE225D7D' AS TEXT) WHERE task_id = 'q2'")
    con.commit()
    con.close()
    started = time.monotonic()
    runs = {"score": cli(env, "score", str(run)), "diagnose": cli(env, "diagnose", str(run)),
            "export": cli(env, "export", str(run), "--format", "madqa", "--no-images", "--out", str(tmp / "exported"))}
    with viewer(env, run) as (server, connect, cookie):
        status, body = get(connect, cookie, "/")
        peak = max(peak_rss_mb(server.pid), *(r.peak_rss_mb for r in runs.values()))
    shown = sum(f"q{i}" in body.decode(errors="replace") for i in range(3, 30))

    def named(r: Bounded) -> int:
        return sum(t in r.stdout + r.stderr for t in BAD)

    parts = [f"viewer {status} ({shown} of 27 good rows shown)"]
    parts += [f"{name} {tail(r).split(':', 1)[0]}, names {named(r)} of 3" for name, r in runs.items()]
    held = status == 200 and shown == 27 and all(
        r.returncode == 0 and "Traceback" not in r.stderr and named(r) == 3 for r in runs.values())
    return row("; ".join(parts), held, time.monotonic() - started, peak)


def probe_n_digits(tmp: Path, env: Env) -> dict[str, Any]:
    run = guess_store(tmp, env, n=2)
    (ep, *_) = episodes(run)
    started = time.monotonic()
    with viewer(env, run) as (server, connect, cookie):
        base = {"run": run.name, "system": ep["system"], "task": ep["task_id"]}
        n_status, _ = get(connect, cookie, f"/output?{urlencode({**base, 'attempt': 0, 'n': '9' * 5000})}")
        a_status, _ = get(connect, cookie, f"/output?{urlencode({**base, 'attempt': '9' * 5000, 'n': 0})}")
        peak = peak_rss_mb(server.pid)
    return row(f"n= 5,000 digits: HTTP {n_status}; attempt= 5,000 digits: HTTP {a_status}",
               400 <= n_status < 500 and 400 <= a_status < 500, time.monotonic() - started, peak)


# -- bounded inputs, no stored secrets (item 5) --------------------------------------------------


def probe_url_password(tmp: Path, env: Env) -> dict[str, Any]:
    """`run --agent external --url http://user:PASSWORD@127.0.0.1:PORT/episode` (the service
    refuses with 500), then `info`: where the password shows."""
    corpus = ingest(tmp, env)
    tasks = tmp / "tasks.jsonl"
    tasks.write_text(json.dumps(QUESTION) + "\n")
    out = tmp / "run"
    started = time.monotonic()
    with LocalJsonServer(lambda path, headers, body: (500, [], b"refused by the probe")) as service:
        url = service.url.replace("http://", f"http://user:{PASSWORD}@") + "/episode"
        made = cli(env, "run", "--agent", "external", "--url", url, "--tasks", str(tasks), "--corpus", str(corpus),
                   "--out", str(out), "--timeout", "20")
    info = cli(env, "info", str(out))
    where = [str(p.relative_to(tmp)) for p in sorted(out.rglob("*")) if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    if PASSWORD in info.stdout + info.stderr:
        where.append("info's output")
    if PASSWORD in made.stdout + made.stderr:
        where.append("run's output")
    stored = episodes(out)
    verdict = (f"run {tail(made).split(':', 1)[0]}; {len(stored)} episode(s); the password in: {', '.join(where)}" if where
               else f"run {tail(made).split(':', 1)[0]}; {len(stored)} episode(s); the password in nothing stored or shown")
    return row(verdict, not where and made.returncode == 0 and len(stored) == 1, time.monotonic() - started,
               max(made.peak_rss_mb, info.peak_rss_mb))


QUESTIONS, CITES = 1_000, 500  # the 18 MB file: 1,000 predictions of 500 citations (500k citations)
IMPORT_MB, EXPORT_MB, SIZE_SECONDS = 200.0, 150.0, 60.0  # tests/runs/test_bounded_inputs.py's bounds


def big_predictions(tmp: Path) -> tuple[Path, Path]:
    """An 18 MB predictions file, QUESTIONS rows of CITES citations each; the tasks file it answers."""
    tasks = tmp / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Question number {i}?", "answer_variants": [["a"]],
                                         "evidence": [{"document": "doc-000.pdf", "page": 1}]}) + "\n"
                             for i in range(QUESTIONS)))
    pred = tmp / "pred.jsonl"
    with pred.open("w") as f:
        for i in range(QUESTIONS):
            cites = [{"file": f"doc-{j % 50:03d}.pdf", "page": j % 300 + 1} for j in range(CITES)]
            f.write(json.dumps({"question": f"Question number {i}?", "answer": ["a"], "id": f"q{i}", "citations": cites}) + "\n")
    return pred, tasks


def probe_big_predictions(tmp: Path, env: Env) -> dict[str, Any]:
    """import of the 18 MB file, export (madqa) of the run it made; import of /dev/zero (address
    space capped at 4 GB, so a read without end is a MemoryError, not the machine's memory)."""
    pred, tasks = big_predictions(tmp)
    size = pred.stat().st_size / 1e6
    imported = cli(env, "import", str(pred), "--tasks", str(tasks), "--system", "big", "--out", str(tmp / "run"))
    exported = cli(env, "export", str(tmp / "run"), "--format", "madqa", "--no-images", "--out", str(tmp / "exported"))
    lines = (tmp / "exported" / "big.jsonl").read_text().count("\n") if (tmp / "exported" / "big.jsonl").exists() else 0
    zero = cli(env, "import", "/dev/zero", "--tasks", str(tasks), "--system", "zero", "--out", str(tmp / "zero"),
               limit_as_mb=4096, kill_after=90)
    runs = [imported, exported, zero]
    verdict = (f"import ({size:.0f} MB): {tail(imported)} ({imported.seconds:.1f} s, {imported.peak_rss_mb:.0f} MB); "
               f"export: {tail(exported)}, {lines} predictions ({exported.seconds:.1f} s, {exported.peak_rss_mb:.0f} MB); "
               f"/dev/zero: {tail(zero)} ({zero.seconds:.1f} s, {zero.peak_rss_mb:.0f} MB)")
    held = (all("Traceback" not in r.stderr and not r.killed and r.seconds < SIZE_SECONDS for r in runs)
            and imported.returncode == 0 and imported.peak_rss_mb < IMPORT_MB
            and exported.returncode == 0 and exported.peak_rss_mb < EXPORT_MB and lines == QUESTIONS
            and zero.returncode == 2 and len(zero.stderr.strip().splitlines()) == 1 and zero.peak_rss_mb < IMPORT_MB)
    return row(verdict, held, sum(r.seconds for r in runs), max(r.peak_rss_mb for r in runs))


def probe_recorded_index(tmp: Path, env: Env) -> dict[str, Any]:
    """A deliverables run with --web recorded:DIR whose index.jsonl holds invalid UTF-8."""
    import shutil

    packages = tmp / "packages"
    shutil.copytree(REPO / "src" / "deskbench" / "data" / "demo" / "deliverables" / "dl-0001-crp", packages / "dl-0001-crp")
    web = tmp / "web"
    web.mkdir()
    (web / "index.jsonl").write_bytes(b'{"kind": "search", "query": "caf\xe9 \xff\xfe", "results": []}\n')
    run = cli({**env, "OPENAI_API_KEY": "sk-test"}, "run", "--tasks", str(packages), "--out", str(tmp / "run"),
              "--model", "openai-compat/m@http://127.0.0.1:9/v1", "--web", f"recorded:{web}", "--quiet")
    held = run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    return row(tail(run), held, run.seconds, run.peak_rss_mb)


def grep(pattern: str, path: Path) -> Bounded:
    """`grep -n -i -E PATTERN PATH` under /usr/bin/time, its peak RSS that one's %M (it ends
    before a 20 ms sampler looks; forked from this process, its own rusage would count this one's pages)."""
    started = time.monotonic()
    run = subprocess.run(["/usr/bin/time", "-f", "%M", "grep", "-n", "-i", "-E", pattern, str(path)],
                         capture_output=True, text=True, timeout=60)
    kb = float(run.stderr.strip().splitlines()[-1])
    return Bounded(run.returncode, run.stdout, "", time.monotonic() - started, kb / 1024, kb / 1024)


def probe_readme(tmp: Path, env: Env) -> dict[str, Any]:
    """A grep of README.md (the commit before the fix for the before side) for the two warnings."""
    if env.get("PYTHONPATH"):
        readme = tmp / "README.md"
        readme.write_text(subprocess.run(["git", "show", f"{BEFORE_COMMIT}:README.md"], cwd=REPO, capture_output=True,
                                         text=True, check=True).stdout)
    else:
        readme = REPO / "README.md"
    shell = grep(r"injection|sh -c|DESKBENCH_QUESTION|-- \{question\}", readme)
    plugins = grep(r"unsandboxed|not sandboxed|privileges|as (the|your) user|with your (rights|permissions)|trust", readme)
    shell_lines = shell.stdout.strip().splitlines()
    warned_shell = any(re.search(r"inject|sh -c|shell", line, re.I) for line in shell_lines) and any(
        "DESKBENCH_QUESTION" in line or "-- {question}" in line for line in shell_lines)
    plugin_lines = [line for line in plugins.stdout.strip().splitlines() if re.search(r"plugin|module:Class", line, re.I)]
    verdict = (f"{'warns' if warned_shell else 'no warning'} on {{question}} in sh -c ({len(shell_lines)} matching line(s)); "
               f"{'warns' if plugin_lines else 'no warning'} that plugins run as the user ({len(plugin_lines)} line(s))")
    return row(verdict, warned_shell and bool(plugin_lines), shell.seconds + plugins.seconds,
               max(shell.peak_rss_mb, plugins.peak_rss_mb))


BEFORE_COMMIT = "72d3efb"  # the README of the before side

PROBES: dict[str, tuple[Probe, str]] = {
    "MCP http: a local process that knows only the port": (
        probe_mcp_no_token, "refused (not 200), 0 episodes stored; the printed URL works"),
    "MCP: client A searches, client B answers on the same server": (
        probe_mcp_two_clients, "A's episode keeps A's answer; B cannot answer it"),
    "run --agent external: a second process finds the port in /proc and answers first": (
        probe_external_race, "the agent's own answer stored; the attacker refused"),
    "MCP --tasks (analytics): execute_code from a client that knows only the port": (
        probe_mcp_execute_code, "no code run, 0 episodes; the printed URL runs code"),
    "fetch guard: 100.100.100.200, 2002:a9fe:a9fe::1 (6to4), fec0::1": (
        probe_fetch_guard, "blocked=True and no connection for all three"),
    "MCP get_page: a document row pointing outside the corpus": (
        probe_get_page_outside, "an error, no image"),
    "viewer /output: a stored files_dir of '.'": (probe_output_files_dir, "run.sqlite not served"),
    "one malformed episode row of each kind (inf tokens, 100,000-deep trajectory, not UTF-8)": (
        probe_malformed_row, "viewer 200 with the other 27 rows; score, diagnose, export exit 0, no traceback, each bad row named"),
    "viewer /output: n= (and attempt=) with 5,000 digits": (probe_n_digits, "4xx, not 500"),
    "run --url http://user:secret@127.0.0.1:PORT/episode, then info": (
        probe_url_password, "the password in no file of the run nor in any output"),
    "import/export of an 18 MB predictions file (1,000 x 500 citations); import of /dev/zero": (
        probe_big_predictions, "import and export exit 0, peaks < 200 MB and < 150 MB, < 60 s each; /dev/zero one line, "
                               "exit 2, < 200 MB"),
    "recorded-web index.jsonl with invalid UTF-8 (run --web recorded:DIR)": (
        probe_recorded_index, "one line, exit 2"),
    "README on --command {question} in sh -c and on plugins": (
        probe_readme, "both warnings present"),
}


def run_all(src: Path | None, only: list[str] | None = None) -> dict[str, dict[str, Any]]:
    env: Env = {"PYTHONPATH": str(src)} if src else {}
    results = {}
    for name, (probe, _) in PROBES.items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        with tempfile.TemporaryDirectory(prefix="bench-hostile-forge-") as tmp:
            try:
                results[name] = probe(Path(tmp), env)
                verdict = results[name]["verdict"].replace(f"{tmp}/", "")  # paths as the user gave them
                results[name]["verdict"] = " ".join(verdict.split()).replace("|", "/")  # one table cell
            except Exception as exc:  # a probe the code breaks in another way is still a row
                results[name] = {"verdict": f"probe failed: {type(exc).__name__}: {str(exc)[:200]}", "held": False,
                                 "seconds": 0.0, "peak_mb": 0.0}
        print(f"{'before' if src else 'after'}: {name}: {results[name]}", file=sys.stderr, flush=True)
    return results


def write_docs(rows: list[dict[str, Any]], page: Path = REPO / "docs" / "benchmarks.md") -> None:
    """This benchmark's rows at the end of the hostile table (its earlier rows replaced, the other
    benchmarks' kept)."""
    begin, end = "<!-- bench:hostile -->", "<!-- /bench:hostile -->"
    text = page.read_text()
    head, rest = text.split(begin, 1)
    block, after = rest.split(end, 1)
    kept = [line for line in block.strip("\n").splitlines() if not line.startswith(f"| {PREFIX}")]
    page.write_text(f"{head}{begin}\n" + "\n".join(kept) + "\n" + markdown_rows(rows) + f"{end}{after}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", type=Path, help="src/ of a checkout without the fix")
    ap.add_argument("--only", choices=("before", "after"), help="run one side; keep the other from --out")
    ap.add_argument("--probe", action="append", help="run only the probes whose name contains this (repeat)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "hostile_forge.json")
    ap.add_argument("--rows", action="store_true", help="only print the docs/benchmarks.md rows of the --out file")
    ap.add_argument("--docs", action="store_true", help="only write the --out file's rows into docs/benchmarks.md")
    args = ap.parse_args()
    if args.rows or args.docs:
        rows = [r for r in json.loads(args.out.read_text())["rows"] if r["after"] is not None]
        if args.docs:
            write_docs(rows)
        print(markdown_rows(rows), end="")
        return
    before_src = args.before_src.resolve() if args.before_src else None
    old = {r["probe"]: r for r in json.loads(args.out.read_text())["rows"]} if args.out.exists() else {}
    before = run_all(before_src, args.probe) if before_src and args.only != "after" else {}
    after = run_all(None, args.probe) if args.only != "before" else {}
    rows = []
    for name, (_, bound) in PROBES.items():
        label = PREFIX + name
        kept = old.get(label, {})
        rows.append({"probe": label, "before": before.get(name, kept.get("before")),
                     "after": after.get(name, kept.get("after")), "bound": bound})
    result = {"benchmark": "hostile inputs: forged episodes (issue 33)", **run_identity(),
              "before_src": str(before_src) if before_src else None, "rows": rows}
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print_rows([r for r in rows if r["after"] is not None])


if __name__ == "__main__":
    main()
