"""No peeking (web_deny.py): the deny-list of the benchmarks' own sources, its rules, the guarded web
the deliverables tools search and fetch through, the after-the-fact check of a provider's search,
the counts, and a run that searches for the benchmark, is blocked, and says so in `score` and the report."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from fake_openai import FakeOpenAI

from deskbench.agents.base import Recorder
from deskbench.errors import UserError
from deskbench.generate.demo import bundled_dir
from deskbench.models.types import ToolCall
from deskbench.runs.identity import stored_identities
from deskbench.runs.protocol import stored_protocol
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep, TrajectoryStep
from deskbench.tracks.deliverables.web_access import FetchTool, WebSearchTool, open_web, parse_web
from deskbench.tracks.deliverables.web_backend import Page, SearchHit
from deskbench.tracks.deliverables.web_deny import (
    DenyList,
    DenyRule,
    GuardedWeb,
    PeekingCounts,
    flag_sources,
    no_peeking_note,
    parse_deny,
    peeking_counts,
)

REPO = "https://github.com/tanm-ast-deccan/dra-response-gen/blob/main/answers.md"
MIRROR = "https://papers.example.org/consulting-dra"
LEGIT = "https://www.example.com/market-report"
QUERY = "consulting deliverables benchmark DRA-bench answers"
MIRROR_TEXT = ("Evaluating Deep Research Agents on Expert Consulting Work: A Benchmark with Verifiers, Rubrics, and "
               "Cognitive Traps\n\nAbstract ...")


def write_recording(folder: Path) -> Path:
    """A recorded web where the benchmark's repository, a mirror of its paper and an ordinary page
    are all reachable, and one search finds them, plus a blog post whose title names the benchmark."""
    (folder / "pages").mkdir(parents=True)
    (folder / "pages" / "repo.txt").write_text("the answers: 42", encoding="utf-8")
    (folder / "pages" / "mirror.txt").write_text(MIRROR_TEXT, encoding="utf-8")
    (folder / "pages" / "legit.txt").write_text("The market is worth USD 61.2 billion.", encoding="utf-8")
    lines = [
        {"kind": "page", "url": REPO, "file": "pages/repo.txt", "content_type": "text/plain"},
        {"kind": "page", "url": MIRROR, "file": "pages/mirror.txt", "content_type": "text/plain"},
        {"kind": "page", "url": LEGIT, "file": "pages/legit.txt", "content_type": "text/plain"},
        {"kind": "search", "query": QUERY, "results": [
            {"title": "dra-response-gen", "url": REPO, "snippet": "responses"},
            {"title": "What DRA-bench asks", "url": "https://blog.example.net/post", "snippet": "a review"},
            {"title": "Market report", "url": LEGIT, "snippet": "USD 61.2 billion"}]},
    ]
    (folder / "index.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=json.dumps(args))


# ---- rules -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "denied"), [
    ("https://github.com/OxRML/MADQA", True),
    ("http://www.github.com/oxrml/madqa/blob/main/README.md", True),  # any scheme, www, case
    ("https://github.com/OxRML/MADQA-fork", False),  # whole path segments only
    ("https://github.com/OxRML", False),
    ("https://huggingface.co/datasets/deccan-ai/dra-bench/viewer/default/train", True),
    ("https://hf.co/datasets/MichaelYang-lyx/AIDA", True),
    ("https://raw.githubusercontent.com/MichaelYang-lyx/AIDABench/main/x.json", True),
    ("https://arxiv.org/abs/2603.12180v1", True),  # any version
    ("https://arxiv.org/abs/2603.1218", False),  # another paper
    ("https://arxiv.org/pdf/2603.12180", True),
    ("https://export.arxiv.org/abs/2603.12180", True),  # a subdomain of a denied host
    ("https://notgithub.com/OxRML/MADQA", False),
    ("not a url at all", False),
])
def test_the_builtin_rules_deny_the_benchmarks_own_sources(url: str, denied: bool) -> None:
    assert (DenyList.default().rule_for(url) is not None) is denied


def test_user_rules_globs_and_names() -> None:
    deny = DenyList.default(["https://Example.org/mirror/*/paper", "leaks.example.com"])
    assert deny.rule_for("https://example.org/mirror/2026/paper/index.html") == "example.org/mirror/*/paper"
    assert deny.rule_for("https://example.org/mirror/a/b/paper") is None  # * stays inside one segment
    assert deny.rule_for("https://cdn.leaks.example.com/anything") == "leaks.example.com"
    assert deny.added == ("example.org/mirror/*/paper", "leaks.example.com")
    # a provider's blocked-domains list carries no wildcard rule; the digest names the list
    assert "leaks.example.com" in deny.blocked_domains() and "example.org/mirror/*/paper" not in deny.blocked_domains()
    assert deny.digest() != DenyList.default().digest() and DenyList.default().digest() == DenyList.default().digest()
    assert deny.named("What is the MADQA leaderboard?") == "madqa"
    assert deny.named("madqa-like datasets") is None  # a longer word is not the name
    assert deny.named("Strategic   Navigation or stochastic SEARCH? a review") == "strategic navigation or stochastic search"
    assert deny.named("document QA agents") is None
    assert deny.named("the DRA bench answers") == "dra bench" and deny.named("drabench") == "drabench"


def test_deny_flags_are_checked_in_one_line(tmp_path: Path) -> None:
    assert parse_deny([], allow_peeking=True) is None
    assert parse_deny([], allow_peeking=False) == DenyList.default()
    listed = tmp_path / "deny.txt"
    listed.write_text("# mirrors\nmirror.example.org/papers  # the paper\n\nleaks.example.com\n", encoding="utf-8")
    deny = parse_deny([f"@{listed}", "x.example.com/a"], allow_peeking=False)
    assert deny is not None and deny.added == ("mirror.example.org/papers", "leaks.example.com", "x.example.com/a")
    with pytest.raises(UserError, match="give one of them"):
        parse_deny(["x.example.com"], allow_peeking=True)
    with pytest.raises(UserError, match=r"--deny-url 'two words' is not a URL pattern; give host/path"):
        parse_deny(["two words"], allow_peeking=False)
    with pytest.raises(UserError, match="is not a URL pattern"):
        DenyRule.parse("*.example.com")
    listed.write_text("ok.example.com\nlocalhost\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"{listed} line 2: 'localhost' is not a URL pattern"):
        parse_deny([f"@{listed}"], allow_peeking=False)
    with pytest.raises(UserError, match="cannot read"):
        parse_deny([f"@{tmp_path / 'missing.txt'}"], allow_peeking=False)


# ---- the guarded web and its tools -----------------------------------------------------------

def test_tools_refuse_denied_fetches_drop_denied_hits_and_record_every_attempt(tmp_path: Path) -> None:
    web = open_web(parse_web(f"recorded:{write_recording(tmp_path / 'web')}"), DenyList.default())
    assert isinstance(web, GuardedWeb) and web.name == "recorded"
    rec = Recorder(None)
    shown = asyncio.run(WebSearchTool(web).run(call("web_search", query=QUERY, count=10), rec))
    assert LEGIT in shown and REPO not in shown and "blog.example.net" not in shown
    assert "2 result(s) from the benchmark's own sources removed" in shown
    refused = asyncio.run(FetchTool(web).run(call("fetch", url=REPO), rec))
    assert refused.startswith("error: ") and "blocked in this run" in refused and "the answers" not in refused
    mirror = asyncio.run(FetchTool(web).run(call("fetch", url=MIRROR), rec))  # the paper under another URL
    assert mirror.startswith("error: ") and "paper's title" in mirror
    assert "61.2 billion" in asyncio.run(FetchTool(web).run(call("fetch", url=LEGIT), rec))
    steps = [s for s in rec.trajectory if isinstance(s, ToolCallStep)]
    assert [s.name for s in steps] == ["web_search", "fetch", "fetch", "fetch"]
    assert steps[0].result["peeking"] == {"action": "filtered", "query_names": "dra-bench", "removed": [
        {"url": REPO, "rule": "github.com/tanm-ast-deccan/dra-response-gen"},
        {"url": "https://blog.example.net/post", "rule": "names 'dra-bench'"}]}
    assert [h["url"] for h in steps[0].result["results"]] == [LEGIT]
    assert steps[1].result["peeking"] == {"action": "blocked", "url": REPO,
                                          "rule": "github.com/tanm-ast-deccan/dra-response-gen"}
    assert steps[2].result["peeking"]["action"] == "blocked" and "peeking" not in steps[3].result
    # by hand: 2 fetches blocked, 2 hits removed, 1 query naming the benchmark, in 1 episode
    assert peeking_counts(rec.trajectory) == PeekingCounts(episodes=1, fetches_blocked=2, hits_removed=2,
                                                           queries_naming=1, sources_seen=0)
    assert flag_sources(rec.trajectory, DenyList.default(), "x") is None  # nothing got through


class Redirecting:
    """A live backend whose every page redirects to the benchmark's dataset page."""

    name = "live"

    async def search(self, query: str, count: int) -> list[SearchHit]:
        return []

    async def fetch(self, url: str) -> Page:
        return Page(url="https://huggingface.co/datasets/OxRML/MADQA", status=200, content_type="text/html",
                    text="the dataset card")

    async def aclose(self) -> None:
        pass


def test_a_redirect_into_a_denied_source_is_refused() -> None:
    rec = Recorder(None)
    shown = asyncio.run(FetchTool(GuardedWeb(Redirecting(), DenyList.default())).run(
        call("fetch", url="https://short.example/x"), rec))
    assert shown.startswith("error: https://huggingface.co/datasets/OxRML/MADQA is one of the benchmark's own sources")
    [step] = rec.trajectory
    assert isinstance(step, ToolCallStep) and step.result["peeking"]["rule"] == "huggingface.co/datasets/OxRML/MADQA"


def test_without_a_deny_list_the_web_is_as_recorded(tmp_path: Path) -> None:
    web = open_web(parse_web(f"recorded:{write_recording(tmp_path / 'web')}"), None)
    assert not isinstance(web, GuardedWeb)
    rec = Recorder(None)
    assert "the answers: 42" in asyncio.run(FetchTool(web).run(call("fetch", url=REPO), rec))
    assert peeking_counts(rec.trajectory) == PeekingCounts()
    assert no_peeking_note(None).detail.startswith("off (--allow-peeking)")


def test_a_provider_search_is_checked_after_the_episode() -> None:
    """OpenAI's and Gemini's research APIs take no deny-list: what their searches returned and what
    the answer cited are checked afterwards, and every denied source is named in a `peeking` step."""
    steps: list[TrajectoryStep] = [
        ToolCallStep(name="web_search", arguments={"query": "AIDABench answer key"}, result={"results": [
            {"title": "", "url": "https://huggingface.co/datasets/MichaelYang-lyx/AIDA/tree/main", "snippet": ""},
            {"title": "", "url": LEGIT, "snippet": ""}]}),
        ToolCallStep(name="fetch", arguments={"url": REPO}, result={"url": REPO}),
        ToolCallStep(name="url_citations", arguments={}, result={"citations": [
            {"cited": "https://github.com/MichaelYang-lyx/AIDABench"}, {"cited": LEGIT}]}),
    ]
    flagged = flag_sources(steps, DenyList.default(), "openai-deep-research")
    assert flagged is not None and flagged.name == "peeking"
    record = flagged.result["peeking"]
    assert record["action"] == "flagged" and record["queries"] == ["AIDABench answer key"]
    assert [(s["url"], s["seen_in"]) for s in record["seen"]] == [
        ("https://huggingface.co/datasets/MichaelYang-lyx/AIDA/tree/main", "web_search result"),
        (REPO, "fetch"), ("https://github.com/MichaelYang-lyx/AIDABench", "citation")]
    assert peeking_counts([*steps, flagged]) == PeekingCounts(episodes=1, sources_seen=3, queries_naming=1)
    note = no_peeking_note(DenyList.default(), "openai-deep-research")
    assert note.source == "deskbench" and "checked after the episode" in note.detail


def test_counts_add_up() -> None:
    a = PeekingCounts(episodes=1, fetches_blocked=2, hits_removed=1)
    b = PeekingCounts(episodes=1, queries_naming=1, sources_seen=4)
    total = a.add(b)
    assert total == PeekingCounts(episodes=2, fetches_blocked=2, hits_removed=1, queries_naming=1, sources_seen=4)
    assert total.total == 8 and total.describe().startswith("8 denied attempt(s) in 2 episode(s): 2 fetch(es) blocked")


# ---- a run that looks for the benchmark ----------------------------------------------------

def test_a_web_run_that_searches_for_the_benchmark_is_blocked_and_the_report_says_so(
        bwrap: str, tmp_path: Path) -> None:
    """A scripted deliverables agent with a recorded web searches for the benchmark and fetches its
    repository: the search loses its denied hits, the fetch is refused (the model reads the refusal),
    the attempts are steps of the episode, and `score` and the report count them. The same run under
    --allow-peeking is another protocol (refused as a resume) and reads the page."""
    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0001-crp", packages / "dl-0001-crp")
    recording = write_recording(tmp_path / "web")

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        done = sum(m["role"] == "tool" for m in body["messages"])
        steps = [{"kind": "tool", "name": "web_search", "arguments": json.dumps({"query": QUERY})},
                 {"kind": "tool", "name": "fetch", "arguments": json.dumps({"url": REPO})}]
        if done < len(steps):
            return steps[done]
        return {"kind": "text", "text": f"The market is worth USD 61.2 billion (source: {LEGIT})."}

    out = tmp_path / "run"
    with FakeOpenAI(script=script) as fake:
        model = f"openai-compat/m@{fake.base_url}"
        proc = run_cli("run", "--tasks", str(packages), "--out", str(out), "--quiet", "--json",
                       "--web", f"recorded:{recording}", "--model", model)
        assert proc.returncode == 0, proc.stderr
        tool_replies = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
        again = run_cli("run", "--tasks", str(packages), "--out", str(out), "--quiet",
                        "--web", f"recorded:{recording}", "--model", model, "--allow-peeking")
    assert "removed" in tool_replies[0] and REPO not in tool_replies[0]
    assert "blocked in this run" in tool_replies[1] and "the answers: 42" not in tool_replies[1]
    assert again.returncode == 2 and "no peeking" in again.stderr, again.stderr
    bad = run_cli("run", "--tasks", str(packages), "--out", str(tmp_path / "bad"), "--web", f"recorded:{recording}",
                  "--model", "openai/gpt-5-mini", "--deny-url", "two words")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "is not a URL pattern" in bad.stderr

    store = RunStore(out, create=False)
    system = "deliverable-agent[web-recorded]:openai-compat/m"
    [episode] = store.episodes(system)
    assert peeking_counts(episode.trajectory) == PeekingCounts(episodes=1, fetches_blocked=1, hits_removed=2,
                                                               queries_naming=1)
    notes = {n.aspect: n for n in stored_protocol(store)[system]}
    assert notes["no peeking"].source == "deskbench" and DenyList.default().digest() in notes["no peeking"].detail
    assert stored_identities(store)[system].config.settings["deny_list"] == DenyList.default().digest()

    scored = run_cli("score", str(out))
    assert scored.returncode == 0, scored.stderr
    assert (f"no peeking, {system}: 4 denied attempt(s) in 1 episode(s): 1 fetch(es) blocked, 2 hit(s) removed, "
            "1 quer(ies) naming the benchmark") in " ".join(scored.stdout.split())
    as_json = json.loads(run_cli("score", str(out), "--json").stdout)
    assert as_json["peeking"][system]["fetches_blocked"] == 1
    html = tmp_path / "report.html"
    reported = run_cli("report", str(out), "--output", str(html))
    assert reported.returncode == 0, reported.stderr
    page = html.read_text(encoding="utf-8")
    assert 'id="deliverables-peeking"' in page
    row = page.split(f'<tr data-system="{system}"><td>{system}</td>', 1)[1].split("</tr>", 1)[0]
    assert [c.split("</td>")[0] for c in row.split("<td>")[1:]] == ["4", "1", "1", "2", "1", "0"]

    open_run = tmp_path / "open"
    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--tasks", str(packages), "--out", str(open_run), "--quiet", "--allow-peeking",
                       "--web", f"recorded:{recording}", "--model", f"openai-compat/m@{fake.base_url}")
        assert proc.returncode == 0, proc.stderr
        read = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert "the answers: 42" in read[1]
    opened = RunStore(open_run, create=False)
    assert peeking_counts(opened.episodes(system)[0].trajectory) == PeekingCounts()
    assert stored_identities(opened)[system].config.settings["deny_list"] == "off"


# ---- the deep-research agents' own searches --------------------------------------------------

def test_claude_research_sends_the_list_and_anthropic_drops_the_denied_hits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Anthropic's web_search takes the rules as blocked_domains (its simulator drops what they
    cover, as the API does); the query that named the benchmark is still flagged afterwards."""
    from sim_anthropic_research import SimResearch

    from deskbench.agents.code_loop import AnalystContext, AnalystSettings
    from deskbench.models.registry import open_model
    from deskbench.sandbox import Limits, Sandbox
    from deskbench.tracks.deliverables.deep_research.anthropic import ClaudeResearch
    from deskbench.tracks.deliverables.tasks import load_package

    shutil.copytree(bundled_dir() / "deliverables" / "dl-0001-crp", tmp_path / "dl-0001-crp")
    task = load_package(tmp_path / "dl-0001-crp")  # hybrid: Anthropic's web_search is injected
    turns = [[{"search": QUERY, "results": [{"url": REPO, "title": "dra-response-gen"},
                                            {"url": LEGIT, "title": "Market report"}]},
              {"text": "The market is worth USD 61.2 billion.", "cite": [LEGIT]}]]
    with SimResearch(turns) as sim:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", sim.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", sim.api_key)
        ctx = AnalystContext(model=open_model("anthropic/claude-opus-4-5"), sandbox=Sandbox(Limits(), unsafe_local=True),
                             tasks_dir=tmp_path, run_dir=tmp_path, settings=AnalystSettings(max_rounds=4))
        result = asyncio.run(ClaudeResearch().run(task, ctx, tmp_path / "out"))
        [sent] = sim.requests
    search = next(t for t in sent["tools"] if t["name"] == "web_search")
    assert search["blocked_domains"] == DenyList.default().blocked_domains()
    [step] = [s for s in result.trajectory if isinstance(s, ToolCallStep) and s.name == "web_search"]
    assert [h["url"] for h in step.result["results"]] == [LEGIT]  # the repository never reached the agent
    response = getattr(result.submission, "response", "")
    flagged = flag_sources(result.trajectory, DenyList.default(), "claude-research", response)
    assert flagged is not None and flagged.result["peeking"] == {"action": "flagged", "seen": [], "queries": [QUERY]}


def test_openai_deep_research_is_flagged_after_the_episode_and_counted(tmp_path: Path) -> None:
    """OpenAI's deep research takes no deny-list: the denied sources its search returned, the page
    it opened and what it cited are named in a `peeking` step of the stored episode, and counted."""
    from sim_openai_deep_research import Research, SimDeepResearch

    from deskbench.tracks.deliverables.deep_research import openai_dr

    packages = tmp_path / "packages"
    shutil.copytree(bundled_dir() / "deliverables" / "dl-0003-scp", packages / "dl-0003-scp")
    dataset = "https://huggingface.co/datasets/MichaelYang-lyx/AIDA/blob/main/QA_en.jsonl"

    def research(prompt: str, inputs: dict[str, bytes]) -> Research:
        return Research(text="The answer.", searches=[("AIDABench answer key", [dataset, LEGIT])],
                        pages=[REPO], cite=[REPO])

    out = tmp_path / "run"
    with SimDeepResearch(research=research) as sim:
        proc = run_cli("run", "--tasks", str(packages), "--out", str(out), "--agent", "openai-deep-research",
                       "--model", "openai/o3-deep-research", "--unsafe-local", "--quiet",
                       env={**sim.env(), openai_dr.POLL_ENV: "0.005"})
    assert proc.returncode == 0, proc.stderr
    store = RunStore(out, create=False)
    system = "openai-deep-research:openai/o3-deep-research"
    [episode] = store.episodes(system)
    [flagged] = [s for s in episode.trajectory if isinstance(s, ToolCallStep) and s.name == "peeking"]
    assert flagged.arguments == {"provider": system}
    assert [(s["url"], s["seen_in"]) for s in flagged.result["peeking"]["seen"]] == [
        (dataset, "web_search result"), (REPO, "fetch")]  # cited too: one source, named once
    assert flagged.result["peeking"]["queries"] == ["AIDABench answer key"]
    notes = {n.aspect: n for n in stored_protocol(store)[system]}
    assert "OpenAI's web_search_preview takes no deny-list" in notes["no peeking"].detail
    scored = run_cli("score", str(out))
    assert scored.returncode == 0, scored.stderr
    assert (f"no peeking, {system}: 3 denied attempt(s) in 1 episode(s): 0 fetch(es) blocked, 0 hit(s) removed, "
            "1 quer(ies) naming the benchmark, 2 denied source(s) found after the episode") in " ".join(
                scored.stdout.split())
