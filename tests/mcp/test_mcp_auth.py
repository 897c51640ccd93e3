"""Issue 33, rows 1-4: every MCP server deskbench starts over HTTP needs its secret (in the URL's
path, or as a bearer token), and every episode is its MCP session's. Real servers on 127.0.0.1
(`deskbench mcp --transport http`, `run --agent external`) and the official `mcp` client; an
attacker here is a local process that knows the port (as /proc/net/tcp tells it) but not the
secret. Each test fails on the code before the issue (/work/before33/src): there the bare
/mcp answered 200 to anyone, and one episode served every client."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from tests.conftest import run_cli
from tests.mcp.test_mcp_external import corpus_and_tasks


@pytest.fixture(scope="module", autouse=True)
def _mcp_sdk() -> None:
    """Skipped without the MCP SDK, checked when these tests run: importing it (with starlette and
    uvicorn, about 1-2 s) at module level made every xdist worker pay at collection."""
    pytest.importorskip("mcp")


TESTS = Path(__file__).parents[1]
AGENT = TESTS / "external_agent.py"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
CITE = [{"file": "harbour.pdf", "page": 2}]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return corpus_and_tasks(tmp_path_factory.mktemp("auth"))


@pytest.fixture()
def analytics_tasks(tmp_path: Path) -> Path:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,10\nsouth,20\n")
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "sum-1", "category": "qa", "instruction": "Total of amount in sales.csv?",
                                "inputs": ["sales.csv"], "difficulty_steps": 1, "answer": "30",
                                "answer_value": 30}) + "\n")
    return path


def initialize_status(url: str, headers: dict[str, str] | None = None) -> int:
    """The HTTP status an MCP initialize POSTed to `url` gets (what any local process can send)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
    try:
        conn.request("POST", parts.path, body=json.dumps(INITIALIZE), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})})
        return conn.getresponse().status
    finally:
        conn.close()


@contextmanager
def deskbench_mcp_http(*args: str) -> Iterator[tuple[str, list[str]]]:
    """`deskbench mcp ... --transport http --port 0` as a process of its own: (the URL it prints,
    the lines of stdout read until then); stopped with Ctrl+C (SIGINT) at the end."""
    proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", "mcp", *args, "--transport", "http",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        url = None
        while url is None:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            line = proc.stdout.readline() if ready else ""
            if not line:
                proc.kill()
                raise AssertionError(f"deskbench mcp printed no URL; stderr: {proc.communicate()[1][-2000:]}")
            lines.append(line)
            found = re.search(r" at (http://\S+?);", line)
            url = found.group(1) if found else None
        yield url, lines
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def tool_calls(ep: object) -> list[str]:
    return [s.name for s in ep.trajectory if isinstance(s, ToolCallStep)]  # type: ignore[attr-defined]


async def answer_over(url: str, answer: str, headers: dict[str, str] | None = None, *,
                      search: str | None = None) -> bool:
    """One MCP session at `url`: an optional search, then provide_answer; True when it was accepted."""
    from mcp import ClientSession

    from tests.mcp_client import is_error, streamablehttp_client

    async with streamablehttp_client(url, headers=headers) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        if search is not None:
            assert not is_error(await session.call_tool("search_documents", {"query": search}))
        result = await session.call_tool("provide_answer", {"answer": [answer], "citations": CITE})
        return not is_error(result)


def test_row1_deskbench_mcp_over_http_needs_its_secret(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Row 1: any local process connected to `deskbench mcp --transport http` and got a session.
    Now: the bare /mcp is 401, a wrong secret 404 (or 401 as a bearer); the printed URL (its
    secret, printed once) and the bearer header on /mcp both work."""
    corpus, _ = setup
    out = tmp_path / "served"
    with deskbench_mcp_http("--corpus", str(corpus), "--out", str(out)) as (url, lines):
        base = f"http://127.0.0.1:{port_of(url)}"
        assert initialize_status(f"{base}/mcp") in (401, 404)  # no secret: refused (was 200)
        secret = urlsplit(url).path.split("/")[1]
        assert len(secret) >= 43 and url == f"{base}/{secret}/mcp"  # 32 random bytes, URL-safe
        wrong = ("A" if secret[0] != "A" else "B") + secret[1:]
        assert initialize_status(f"{base}/{wrong}/mcp") in (401, 404)
        assert initialize_status(f"{base}/mcp", {"Authorization": f"Bearer {wrong}"}) == 401
        assert initialize_status(f"{base}/{secret}/mcp/../mcp") in (401, 404)
        assert sum(secret in line for line in lines) == 1  # printed once
        assert initialize_status(url) == 200
        assert asyncio.run(asyncio.wait_for(answer_over(url, "via the URL"), 60))
        assert asyncio.run(asyncio.wait_for(
            answer_over(f"{base}/mcp", "via the bearer", {"Authorization": f"Bearer {secret}"}), 60))
    answers = sorted(e.submission.answer[0] for e in RunStore(out, create=False).episodes("external"))  # type: ignore[union-attr]
    assert answers == sorted(["via the URL", "via the bearer"])


def test_row2_two_sessions_on_one_server_cannot_mix_episodes(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Row 2: client A searched, client B called provide_answer, and one episode held B's answer
    over A's private search. Now each MCP session has its own episode: B's answer ends B's
    episode (B's calls only); A's search stays in A's, answered by A."""
    from mcp import ClientSession

    from tests.mcp_client import is_error, streamablehttp_client

    corpus, _ = setup
    out = tmp_path / "served"

    async def clients(url: str) -> None:
        async with streamablehttp_client(url) as (ra, wa, _), ClientSession(ra, wa) as a, \
                streamablehttp_client(url) as (rb, wb, _), ClientSession(rb, wb) as b:
            await a.initialize()
            await b.initialize()
            assert not is_error(await a.call_tool("search_documents", {"query": "victim private search"}))
            await b.call_tool("provide_answer", {"answer": ["attacker answer"], "citations": CITE})
            assert not is_error(await a.call_tool("provide_answer", {"answer": ["victim answer"], "citations": CITE}))

    with deskbench_mcp_http("--corpus", str(corpus), "--out", str(out)) as (url, _):
        asyncio.run(asyncio.wait_for(clients(url), 90))
    episodes = {e.submission.answer[0]: e for e in RunStore(out, create=False).episodes("external")  # type: ignore[union-attr]
                if e.submission is not None}
    assert tool_calls(episodes["victim answer"]) == ["search_documents", "provide_answer"]
    attacker = episodes["attacker answer"]  # B's own episode, holding nothing of A's
    assert tool_calls(attacker) == ["provide_answer"]
    assert "victim private search" not in attacker.model_dump_json()
    assert attacker.task_id != episodes["victim answer"].task_id


ATTACKER = """import http.client, json, sys, asyncio
port = int(sys.argv[1])
body = json.dumps({init!r})
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
conn.request("POST", "/mcp", body=body, headers={{"Content-Type": "application/json",
             "Accept": "application/json, text/event-stream"}})
status = conn.getresponse().status
conn.close()
open(sys.argv[2], "w").write(str(status))
if status == 200:  # the server let us in: answer first, as the real agent would not
    from mcp import ClientSession
    sys.path.insert(0, {tests!r})
    from mcp_client import streamablehttp_client
    async def forge():
        async with streamablehttp_client(f"http://127.0.0.1:{{port}}/mcp") as (r, w, _), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("provide_answer", {{"answer": ["forged"], "citations": [{{"file": "harbour.pdf", "page": 2}}]}})
    asyncio.run(forge())
"""

# The real agent's wrapper: a second local process (the attacker, given only the port) goes first,
# then the real agent (tests/external_agent.py) runs with the URL deskbench handed over.
WRAPPER = """import os, subprocess, sys
from urllib.parse import urlsplit
port = urlsplit(os.environ["DESKBENCH_MCP_URL"]).port
env = {{k: v for k, v in os.environ.items() if not k.startswith("DESKBENCH_")}}
subprocess.run([sys.executable, {attacker!r}, str(port), {status!r}], env=env, timeout=60)
os.execv(sys.executable, [sys.executable, {agent!r}, *sys.argv[1:]])
"""


def test_row3_a_second_process_that_finds_the_port_cannot_answer_an_external_episode(
        setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Row 3: during `run --agent external`, a second local process found the episode's port,
    answered first and was stored `ok`, scored correct. Now it is refused at the door (it has
    the port, not the secret) and the stored episode is the real agent's."""
    corpus, tasks = setup
    attacker, status = tmp_path / "attacker.py", tmp_path / "status.txt"
    attacker.write_text(ATTACKER.format(init=INITIALIZE, tests=str(TESTS)))
    wrapper = tmp_path / "agent.py"
    wrapper.write_text(WRAPPER.format(attacker=str(attacker), status=str(status), agent=str(AGENT)))
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {wrapper} {{question}}",
                   "--tasks", str(tasks), "--corpus", str(corpus), "--out", str(out), "--limit", "1", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert status.read_text() in ("401", "404")  # the attacker was refused (was 200)
    (ep,) = RunStore(out, create=False).episodes("external")
    assert ep.status == "ok", ep.error
    assert ep.submission is not None and ep.submission.answer == ["Ingrid"]  # type: ignore[attr-defined]
    assert tool_calls(ep) == ["search_documents", "get_page", "provide_answer"]
    assert "forged" not in ep.model_dump_json()


SECOND_SESSION = """import asyncio, os, sys
from mcp import ClientSession
sys.path.insert(0, TESTS_DIR)
from mcp_client import is_error, streamablehttp_client
url = os.environ["DESKBENCH_MCP_URL"]
async def main():
    async with streamablehttp_client(url) as (ra, wa, _), ClientSession(ra, wa) as a, \\
            streamablehttp_client(url) as (rb, wb, _), ClientSession(rb, wb) as b:
        await a.initialize()
        await b.initialize()
        await a.call_tool("search_documents", {"query": "harbour master"})
        other = await b.call_tool("provide_answer", {"answer": ["second session"], "citations": []})
        open(sys.argv[1], "w").write(other.content[0].text if is_error(other) else "accepted")
        await a.call_tool("provide_answer", {"answer": ["Ingrid"], "citations": [{"file": "harbour.pdf", "page": 2}]})
asyncio.run(main())
"""


def test_an_external_episode_belongs_to_the_first_session_that_calls_a_tool(setup: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    """Even with the URL, a second MCP session cannot touch the episode: its call is a tool error
    and nothing of it is recorded; the first session's calls are the episode."""
    corpus, tasks = setup
    agent, said = tmp_path / "two_sessions.py", tmp_path / "said.txt"
    agent.write_text(SECOND_SESSION.replace("TESTS_DIR", repr(str(TESTS))))
    out = tmp_path / "run"
    proc = run_cli("run", "--agent", "external", "--command", f"{sys.executable} {agent} {said}",
                   "--tasks", str(tasks), "--corpus", str(corpus), "--out", str(out), "--limit", "1", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "another MCP session" in said.read_text()
    (ep,) = RunStore(out, create=False).episodes("external")
    assert ep.status == "ok" and ep.submission is not None
    assert ep.submission.answer == ["Ingrid"]  # type: ignore[attr-defined]
    assert tool_calls(ep) == ["search_documents", "provide_answer"]
    assert "second session" not in ep.model_dump_json()


def test_row4_an_unauthenticated_client_cannot_call_execute_code(analytics_tasks: Path, tmp_path: Path) -> None:
    """Row 4: an unauthenticated client of `deskbench mcp --tasks` (analytics) ran execute_code
    and its answer was scored. Now it gets no session: no call runs, nothing is stored; the
    agent with the URL answers as before."""
    from mcp import ClientSession

    from tests.mcp_client import is_error, streamablehttp_client

    out = tmp_path / "served"

    async def unauthenticated(url: str) -> str:
        try:
            async with streamablehttp_client(url) as (r, w, _), ClientSession(r, w) as s:
                await s.initialize()
                ran = await s.call_tool("execute_code", {"code": "open('/mnt/result/pwned.txt', 'w').write('x')"})
                return "error" if is_error(ran) else "ran"
        except Exception as exc:  # refused at the door: the client cannot even initialize
            return f"refused: {type(exc).__name__}"

    async def agent(url: str) -> None:
        async with streamablehttp_client(url) as (r, w, _), ClientSession(r, w) as s:
            await s.initialize()
            assert not is_error(await s.call_tool("provide_answer", {"answer": "30"}))

    with deskbench_mcp_http("--tasks", str(analytics_tasks), "--out", str(out)) as (url, _):
        bare = f"http://127.0.0.1:{port_of(url)}/mcp"
        assert initialize_status(bare) in (401, 404)  # was 200
        assert asyncio.run(asyncio.wait_for(unauthenticated(bare), 60)).startswith("refused")
        asyncio.run(asyncio.wait_for(agent(url), 60))
    (ep,) = RunStore(out, create=False).episodes("external")
    assert tool_calls(ep) == ["provide_answer"] and ep.submission.answer == "30"  # type: ignore[union-attr]
    assert not list(out.rglob("pwned.txt"))


def test_rate_and_episode_limits_refuse_calls_over_them(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """`deskbench mcp`'s limits, on a real server in this process with the token bucket's clock
    driven by the test: a call over the rate is refused with a request to slow down (not
    queued) and passes once the clock has moved; a session past --max-episodes is refused."""
    from mcp import ClientSession

    from deskbench.mcp.server import TokenBucket, build_server, serve_http
    from deskbench.mcp.standalone import Episodes
    from deskbench.tracks.docqa.mcp_tools import DocqaQuestions
    from tests.mcp_client import is_error, streamablehttp_client

    corpus, _ = setup
    clock = [100.0]
    store = RunStore(tmp_path / "served")
    served = DocqaQuestions(corpus, store, "Who is the harbour master?", 5)
    bucket = TokenBucket(2.0, clock=lambda: clock[0])  # 2 calls a second, 2 at once
    source = Episodes(store, served, max_episodes=2, bucket=bucket)
    server = build_server(served.server_name, served.tools(source), served.instructions)

    async def answer(s: ClientSession, text: str) -> tuple[bool, str]:
        result = await s.call_tool("provide_answer", {"answer": [text], "citations": CITE})
        return is_error(result), result.content[0].text  # type: ignore[union-attr]

    async def main() -> None:
        async with serve_http(server) as url, streamablehttp_client(url) as (r, w, _), ClientSession(r, w) as a:
            await a.initialize()
            assert await answer(a, "one") == (False, "answer recorded")
            assert (await answer(a, "two"))[0] is False
            refused, text = await answer(a, "three")  # the bucket is empty: the clock has not moved
            assert refused and "slow down" in text and "--max-calls-per-second" in text
            clock[0] += 0.5  # one token back
            async with streamablehttp_client(url) as (rb, wb, _), ClientSession(rb, wb) as b:
                await b.initialize()
                refused, text = await answer(b, "four")  # a third episode on a server of --max-episodes 2
                assert refused and "--max-episodes" in text
            clock[0] += 0.4  # 0.8 tokens: still over the rate
            assert "slow down" in (await answer(a, "five"))[1]

    asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted(e.submission.answer[0] for e in store.episodes("external")) == ["one", "two"]  # type: ignore[union-attr]
    assert source.open == {}


def test_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    from deskbench.mcp.server import TokenBucket

    now = [0.0]
    bucket = TokenBucket(4.0, burst=2.0, clock=lambda: now[0])
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    now[0] += 0.25
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] += 100
    assert [bucket.take() for _ in range(3)] == [True, True, False]  # never more than the burst


@pytest.mark.parametrize(("flag", "value", "line"), [
    ("--max-episodes", "0", "--max-episodes 0 is not valid"),
    ("--max-calls-per-second", "0", "--max-calls-per-second 0 is not valid"),
    ("--max-calls-per-second", "nan", "--max-calls-per-second nan is not valid"),
    ("--port", "70000", "--port 70000 is not valid"),
])
def test_limit_options_are_validated_in_one_line(setup: tuple[Path, Path], tmp_path: Path, flag: str, value: str,
                                                 line: str) -> None:
    corpus, _ = setup
    proc = run_cli("mcp", "--corpus", str(corpus), "--out", str(tmp_path / "r"), "--transport", "http", flag, value)
    assert proc.returncode == 2
    assert line in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_stdio_is_one_client_and_its_episodes_follow_each_other(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """stdio is unchanged: no secret, the one client's answers are consecutive episodes."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    corpus, _ = setup
    out = tmp_path / "served"
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "deskbench.cli", "mcp", "--corpus", str(corpus), "--out", str(out)], env=dict(os.environ))

    async def client() -> None:
        # errlog now: stdio_client's default is the sys.stderr of when mcp.client.stdio was first imported,
        # which may be a CliRunner's stream (an in-process CLI call), with no file descriptor
        async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("search_documents", {"query": "harbour"})
            await session.call_tool("provide_answer", {"answer": ["first"], "citations": CITE})
            await session.call_tool("provide_answer", {"answer": ["second"], "citations": CITE})

    asyncio.run(asyncio.wait_for(client(), 90))
    episodes = sorted(RunStore(out, create=False).episodes("external"), key=lambda e: e.task_id)
    assert [(e.task_id, tool_calls(e)) for e in episodes] == [("mcp-1", ["search_documents", "provide_answer"]),
                                                               ("mcp-2", ["provide_answer"])]
