"""Web access for the deliverables agent (§3.4, Table 5): the recorded backend, the Brave Search
adapter and the HTTP fetch against a local double that keeps the API's rules, the tools'
trajectory records, and whole runs with a scripted model (web_search, fetch, then the answer)
whose citations the citation-domain verifier checks. Nothing here leaves 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from brave_double import BraveDouble
from conftest import run_cli
from deliverable_responses import recompute, respond
from fake_openai import FakeOpenAI

from deskbench.agents.base import Recorder
from deskbench.errors import UserError
from deskbench.generate.demo import bundled_dir
from deskbench.models.types import ToolCall
from deskbench.runs.protocol import stored_protocol
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep
from deskbench.tracks.deliverables.scoring.deliverables_run import score_run
from deskbench.tracks.deliverables.scoring.verifiers_citations import cited_hosts
from deskbench.tracks.deliverables.tasks import DeliverableSubmission, load_packages
from deskbench.tracks.deliverables.web_access import FetchTool, WebSearchTool, parse_web
from deskbench.tracks.deliverables.web_backend import WebError, WebUnavailable
from deskbench.tracks.deliverables.web_live import BraveSearch, LiveWeb
from deskbench.tracks.deliverables.web_page_text import html_to_text
from deskbench.tracks.deliverables.web_recorded import RecordedWeb, RecordingWeb

MORDOR = "https://www.mordorintelligence.com/industry-reports/europe-automotive-parts-market"
BLOG = "https://autoblog.example.net/eu-parts-outlook"
QUERY = "Mordor Intelligence Europe automotive parts market"
MORDOR_HTML = (b"<html><head><title>Europe Automotive Parts Market - Mordor Intelligence</title>"
               b"<script>var tracking = 1;</script><style>p{}</style></head><body>"
               b"<h1>Europe Automotive Parts Market</h1><p>The market is valued at USD 61.2&nbsp;billion "
               b"in 2025.</p><table><tr><td>OEM</td><td>80%</td></tr></table></body></html>")


def write_recording(folder: Path) -> Path:
    """A small recorded web: two pages and one search that finds both."""
    (folder / "pages").mkdir(parents=True)
    (folder / "pages" / "mordor.html").write_bytes(MORDOR_HTML)
    (folder / "pages" / "blog.txt").write_text("EU parts outlook: the market is worth USD 70 billion.",
                                               encoding="utf-8")
    lines = [
        {"kind": "page", "url": MORDOR, "file": "pages/mordor.html", "content_type": "text/html"},
        {"kind": "page", "url": BLOG, "file": "pages/blog.txt", "content_type": "text/plain"},
        {"kind": "search", "query": QUERY, "results": [
            {"title": "Europe Automotive Parts Market", "url": MORDOR, "snippet": "USD 61.2 billion"},
            {"title": "EU parts outlook", "url": BLOG, "snippet": "a blog"}]},
    ]
    (folder / "index.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=json.dumps(args))


# ---- page text and the recorded backend -------------------------------------------------------

def test_html_to_text_keeps_the_reading_and_drops_the_machinery() -> None:
    text = html_to_text(MORDOR_HTML.decode())
    assert text.startswith("Europe Automotive Parts Market - Mordor Intelligence\n")
    assert "USD 61.2 billion in 2025." in text and "\nOEM\t80%" in text
    assert "tracking" not in text and "p{}" not in text


def test_recorded_web_answers_what_was_saved_and_misses_the_rest(tmp_path: Path) -> None:
    web = RecordedWeb(write_recording(tmp_path / "web"))

    async def go() -> None:
        hits = await web.search("  mordor intelligence EUROPE automotive parts   market ", 5)
        assert [h.url for h in hits] == [MORDOR, BLOG]
        assert [h.url for h in await web.search(QUERY, 1)] == [MORDOR]
        assert await web.search("something else", 5) == []
        page = await web.fetch(MORDOR.replace("https://www.", "HTTPS://WWW.") + "/#top")
        assert page.url == MORDOR and "USD 61.2 billion" in page.text
        assert (await web.fetch(BLOG)).text.startswith("EU parts outlook")
        with pytest.raises(WebError, match="not in the recorded web"):
            await web.fetch("https://www.mordorintelligence.com/other")

    asyncio.run(go())


@pytest.mark.parametrize(("line", "needle"), [
    ('{"kind": "page", "url": "https://a.com"}', "field 'page.file'"),
    ('{"kind": "page", "url": "https://a.com", "file": "../outside.html"}', "not a file inside"),
    ('{"kind": "serch", "query": "x"}', "field"),
    ("not json", "line 1"),
])
def test_a_bad_recording_is_one_line(tmp_path: Path, line: str, needle: str) -> None:
    (tmp_path / "outside.html").write_text("x")
    folder = tmp_path / "web"
    folder.mkdir()
    (folder / "index.jsonl").write_text(line + "\n")
    with pytest.raises(UserError, match="index.jsonl line 1") as info:
        parse_web(f"recorded:{folder}")
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_web_flag_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_SEARCH_API_KEY", raising=False)
    for value, needle in (("recorded", "needs its folder"), (f"recorded:{tmp_path}", "no index.jsonl"),
                          ("bing", "is not known"), ("brave", "$BRAVE_SEARCH_API_KEY")):
        with pytest.raises(UserError, match="--web") as info:
            parse_web(value)
        assert needle in str(info.value)
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "k")
    choice = parse_web("brave", tmp_path / "rec")
    assert choice.live and choice.record_to == tmp_path / "rec"
    assert parse_web(f"recorded:{write_recording(tmp_path / 'w')}").kind == "recorded"


# ---- the Brave adapter and the HTTP fetch, against the local double ---------------------------

def brave(double: BraveDouble, key: str = "test-key", timeout: float = 60.0, **kw: Any) -> tuple[LiveWeb, list[float]]:
    """A LiveWeb on the double; its timeout generous (a loaded machine is slow), but where a test
    wants one to expire (the double's slow pages take 2 s)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    api = BraveSearch(key=key, endpoint=double.endpoint, sleep=sleep, **kw)
    return LiveWeb(api, allow_private=True, timeout=timeout, max_bytes=4000), waits


HITS = {QUERY: [{"title": "Europe <strong>Automotive</strong> Parts", "url": MORDOR,
                 "description": "Valued at <strong>USD 61.2 billion</strong>."},
                {"title": "Outlook", "url": BLOG, "description": "blog"}]}


def test_brave_search_sends_the_key_and_reads_the_hits() -> None:
    with BraveDouble(results=HITS) as double:
        web, _ = brave(double)

        async def go() -> Any:
            try:
                return await web.search(QUERY, 50)  # more than the API's 20: asked for 20
            finally:
                await web.aclose()

        hits = asyncio.run(go())
    assert [h.url for h in hits] == [MORDOR, BLOG]
    assert hits[0].snippet == "Valued at USD 61.2 billion." and hits[0].title.startswith("Europe <strong>")
    path, headers = double.requests[0]
    assert headers["x-subscription-token"] == "test-key" and headers["accept"] == "application/json"
    assert "count=20" in path and "q=Mordor+Intelligence" in path


@pytest.mark.parametrize("status", [401, 422])
def test_a_rejected_key_ends_the_episode(status: int) -> None:
    with BraveDouble(invalid_status=status) as double:
        web, _ = brave(double, key="wrong")
        with pytest.raises(WebUnavailable, match=f"rejected the key in .BRAVE_SEARCH_API_KEY .{status} "
                                                 "SUBSCRIPTION_TOKEN_INVALID"):
            asyncio.run(_search_and_close(web, QUERY))


def test_rate_limit_waits_for_the_reset_then_gives_up() -> None:
    with BraveDouble(results=HITS, rate_limit=1) as double:
        web, waits = brave(double, retries=2)
        assert [h.url for h in asyncio.run(_search_and_close(web, QUERY))] == [MORDOR, BLOG]
        with pytest.raises(WebUnavailable, match="429 RATE_LIMITED: Request rate limit exceeded"):
            asyncio.run(_search_and_close(web, QUERY))
    assert waits == [1.0, 1.0]  # X-RateLimit-Reset's first window, each retry
    assert double.searches == 4


def test_a_bad_query_is_the_tools_answer() -> None:
    with BraveDouble() as double:
        web, _ = brave(double)
        rec = Recorder(model=None)  # type: ignore[arg-type]
        text = asyncio.run(_run_and_close(web, WebSearchTool(web), call("web_search", query=" "), rec))
        assert text.startswith("error: web_search needs a non-empty 'query'")
        api = BraveSearch(key="test-key", endpoint=double.endpoint + "?count=0")
        with pytest.raises(WebError, match="422 VALIDATION"):
            asyncio.run(_search_and_close(LiveWeb(api, allow_private=True), QUERY))


def test_fetch_reads_pages_with_a_cap_a_timeout_and_no_key() -> None:
    pages = {"/report": (200, "text/html; charset=utf-8", MORDOR_HTML),
             "/big": (200, "text/plain", b"x" * 10_000),
             "/file.bin": (200, "application/octet-stream", b"\x00\x01"),
             "/slow": (200, "text/plain", b"late")}
    with BraveDouble(pages=pages, slow={"/slow"}) as double:
        web, _ = brave(double)
        impatient, _ = brave(double, timeout=0.5)  # for /slow, which answers after 2 s

        async def go() -> None:
            try:
                page = await web.fetch(double.url + "/report")
                assert "USD 61.2 billion" in page.text and page.status == 200
                big = await web.fetch(double.url + "/big")
                assert big.text.startswith("x" * 4000) and "larger than 4000 bytes" in big.text
                assert len(big.text) < 4200
                for path, needle in (("/missing", "HTTP 404"), ("/file.bin", "application/octet-stream")):
                    with pytest.raises(WebError, match=needle):
                        await web.fetch(double.url + path)
                with pytest.raises(WebError, match="could not be fetched"):
                    await impatient.fetch(double.url + "/slow")
                with pytest.raises(WebError, match="not an http"):
                    await web.fetch("file:///etc/passwd")
            finally:
                await web.aclose()
                await impatient.aclose()

        asyncio.run(go())
        assert all("x-subscription-token" not in h for p, h in double.requests)  # never sent to a page
    guarded = LiveWeb(BraveSearch(key="k"))
    with pytest.raises(WebError, match="local or private address"):
        asyncio.run(guarded.fetch("http://127.0.0.1:9/x"))


def test_tools_record_what_the_agent_read_and_a_live_run_can_be_replayed(tmp_path: Path) -> None:
    with BraveDouble(results={QUERY: [{"title": "R", "url": "URL/report", "description": "d"}]},
                     pages={"/report": (200, "text/html", MORDOR_HTML)}) as double:
        double.results[QUERY][0]["url"] = double.url + "/report"
        live, _ = brave(double)
        web = RecordingWeb(live, tmp_path / "saved")
        rec = Recorder(model=None)  # type: ignore[arg-type]

        async def go() -> tuple[str, str, str]:
            try:
                hits = await WebSearchTool(web).run(call("web_search", query=QUERY, count=3), rec)
                page = await FetchTool(web).run(call("fetch", url=double.url + "/report"), rec)
                miss = await FetchTool(web).run(call("fetch", url=double.url + "/gone"), rec)
                return hits, page, miss
            finally:
                await web.aclose()

        hits, page, miss = asyncio.run(go())
        url = double.url + "/report"
    assert hits.startswith(f"[1] R\n{url}\nd") and "USD 61.2 billion" in page and miss.startswith("error: ")
    steps = [s for s in rec.trajectory if isinstance(s, ToolCallStep)]
    assert [s.name for s in steps] == ["web_search", "fetch", "fetch"]
    assert steps[0].result["results"][0]["url"] == url and steps[0].result["backend"] == "brave"
    assert steps[1].result["url"] == url and "USD 61.2 billion" in steps[1].result["text"]
    assert steps[1].result["status"] == 200 and len(steps[1].result["sha256"]) == 64
    assert "HTTP 404" in steps[2].result["error"]

    replay = RecordedWeb(tmp_path / "saved")  # the same answers, offline
    assert [h.url for h in asyncio.run(replay.search(QUERY, 3))] == [url]
    assert "USD 61.2 billion" in asyncio.run(replay.fetch(url)).text


async def _search_and_close(web: LiveWeb, query: str) -> Any:
    try:
        return await web.search(query, 5)
    finally:
        await web.aclose()


async def _run_and_close(web: LiveWeb, tool: Any, c: ToolCall, rec: Recorder) -> str:
    try:
        return await tool.run(c, rec)
    finally:
        await web.aclose()


# ---- whole runs --------------------------------------------------------------------------------

def tool(name: str, **args: Any) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": json.dumps(args)}


def write_files_code(folder: Path) -> str:
    import base64

    lines = [f"open('/mnt/result/{p.name}', 'wb').write(__import__('base64').b64decode("
             f"'{base64.b64encode(p.read_bytes()).decode()}'))" for p in sorted(folder.iterdir())]
    return "\n".join([*lines, "print('saved')"])


def test_a_run_searches_fetches_cites_and_the_domain_verifier_judges_it(bwrap: str, tmp_path: Path) -> None:
    """Two scripted systems on the hybrid CRP package (Mordor Intelligence authorized): both search,
    one fetches and cites the Mordor page (the citation-domain verifier passes), the other a blog
    (it fails). The calls and what they returned are in each episode's trajectory."""
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0001-crp", packages / "dl-0001-crp")
    [task] = load_packages(packages)
    answer = respond(task, recompute(task, task.directory), tmp_path / "answer", set())  # type: ignore[arg-type]
    recording = write_recording(tmp_path / "web")
    cite = {"mordor": MORDOR, "blog": BLOG}

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        url = cite[body["model"]]
        done = sum(m["role"] == "tool" for m in body["messages"])
        steps = [tool("web_search", query=QUERY), tool("fetch", url=url),
                 tool("execute_code", code=write_files_code(tmp_path / "answer"))]
        if done < len(steps):
            return steps[done]
        return {"kind": "text", "text": f"{answer}\n\nSource: market size from {url}"}

    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        args = [a for m in cite for a in ("--model", f"openai-compat/{m}@{fake.base_url}")]
        proc = run_cli("run", "--tasks", str(packages), "--out", str(out), "--quiet", "--json",
                       "--web", f"recorded:{recording}", *args)
        assert proc.returncode == 0, proc.stderr
        requests = list(fake.requests)
    first = requests[0]
    assert {t["function"]["name"] for t in first["tools"]} == {"execute_code", "web_search", "fetch"}
    assert "web_search finds pages" in first["messages"][0]["content"]
    fetched = next(r for r in requests if r["model"] == "mordor" and
                   sum(m["role"] == "tool" for m in r["messages"]) == 2)
    assert "USD 61.2 billion in 2025." in fetched["messages"][-1]["content"]

    store = RunStore(out, create=False)
    names = {m: f"deliverable-agent[web-recorded]:openai-compat/{m}" for m in cite}
    assert store.systems() == sorted(names.values())
    notes = {n.aspect: n for n in stored_protocol(store)[names["mordor"]]}
    assert notes["web access"].source == "deskbench" and str(recording) in notes["web access"].detail
    assert notes["agent prompt"].source == "paper"
    for m, url in cite.items():
        [ep] = [e for e in store.episodes() if e.system == names[m]]
        assert ep.status == "ok" and isinstance(ep.submission, DeliverableSubmission)
        calls = [s for s in ep.trajectory if isinstance(s, ToolCallStep)]
        assert [s.name for s in calls] == ["web_search", "fetch", "execute_code"]
        assert [h["url"] for h in calls[0].result["results"]] == [MORDOR, BLOG]
        assert calls[1].result["url"] == url and calls[1].result["backend"] == "recorded"
        # every host the deliverable cites was fetched in the episode: the citation is auditable
        fetched_hosts = set(cited_hosts(" ".join(s.result.get("url", "") for s in calls)))
        assert set(cited_hosts(ep.submission.response)) <= fetched_hosts

    items = {i.system: i for i in asyncio.run(score_run(store))}
    verdict = {m: next(v for v in items[names[m]].verifiers if v.id == "cited_domains") for m in cite}
    assert verdict["mordor"].status == "pass", verdict["mordor"]
    assert verdict["blog"].status == "fail" and "autoblog.example.net" in verdict["blog"].evidence


def test_trap_hints_are_a_variant_stored_beside_the_paper_prompt(bwrap: str, tmp_path: Path) -> None:
    """The default and --trap-hints runs share one run directory as two systems; only the
    variant's prompt names the traps; each system's protocol is kept; resuming needs the same flags."""
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", packages / "dl-0003-scp")
    out = tmp_path / "run"
    with FakeOpenAI(script=lambda body, n: {"kind": "text", "text": "# Memo\nDone."}) as fake:
        model = f"openai-compat/m@{fake.base_url}"
        for extra in ((), ("--trap-hints",), ("--trap-hints",)):
            proc = run_cli("run", "--tasks", str(packages), "--out", str(out), "--model", model,
                           "--quiet", "--json", *extra)
            assert proc.returncode == 0, proc.stderr
        prompts = [r["messages"][0]["content"] for r in fake.requests]
    assert len(prompts) == 2  # the third run resumed: nothing left to do
    assert "averages that must be weighted" not in prompts[0] and "footnote" not in prompts[0].lower()
    assert "averages that must be weighted" in prompts[1]
    store = RunStore(out, create=False)
    assert store.systems() == ["deliverable-agent:openai-compat/m", "deliverable-agent[trap-hints]:openai-compat/m"]
    protocol = stored_protocol(store)
    prompt_source = {s: next(n.source for n in notes if n.aspect == "agent prompt") for s, notes in protocol.items()}
    assert prompt_source == {"deliverable-agent:openai-compat/m": "paper",
                             "deliverable-agent[trap-hints]:openai-compat/m": "deskbench"}
    assert all({n.aspect for n in notes} == {"agent prompt", "web access"} for notes in protocol.values())


def test_fetch_guard_follows_redirects_and_names_one_hop_at_a_time() -> None:
    """The guard checks every hop and every address a name resolves to: a page that redirects to a
    blocked address, a name resolving to one (here `localhost` -> 127.0.0.1/::1, no network), a
    redirect loop. 127.0.0.2 stands for the blocked address (all of 127/8 is this machine); the
    double on 127.0.0.1 stands for the public web."""
    import ipaddress

    blocked_ips = {ipaddress.ip_address("127.0.0.2")}
    with BraveDouble(pages={"/ok": (200, "text/html", b"<p>fine</p>")}) as double:
        port = double.url.rsplit(":", 1)[1]
        double.redirects.update({"/to-private": f"http://127.0.0.2:{port}/ok", "/to-ok": "/ok",
                                 "/loop": "/loop", "/to-name": f"http://localhost:{port}/ok"})
        web = LiveWeb(BraveSearch(key="k"), blocked=lambda ip: ip in blocked_ips, timeout=5.0)

        async def go() -> None:
            try:
                page = await web.fetch(double.url + "/to-ok")
                assert page.url == double.url + "/ok" and "fine" in page.text
                with pytest.raises(WebError, match="local or private address"):
                    await web.fetch(double.url + "/to-private")
                with pytest.raises(WebError, match="redirects more than 5 times"):
                    await web.fetch(double.url + "/loop")
                with pytest.raises(WebError, match="local or private address"):
                    await web.fetch(double.url + "/to-name")  # `localhost` is refused by name, before resolving
            finally:
                await web.aclose()

        asyncio.run(go())
        assert not any(p.startswith("/ok") and h.get("host", "").startswith("127.0.0.2") for p, h in double.requests)

        by_address = LiveWeb(BraveSearch(key="k"), blocked=lambda ip: ip.is_loopback, timeout=5.0)

        async def resolved() -> None:
            try:
                with pytest.raises(WebError, match="resolves to .*local or private address"):
                    await by_address.fetch(f"http://{name}:{port}/ok")  # a name, not a literal
            finally:
                await by_address.aclose()

        import socket

        name = socket.gethostname()
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(name, None)}
        except OSError:
            addresses = set()
        if not addresses or not all(ipaddress.ip_address(a).is_loopback for a in addresses):
            pytest.skip(f"this machine's name {name!r} does not resolve to loopback without the network")
        asyncio.run(resolved())
