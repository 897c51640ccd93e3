"""No peeking (issue 37, item 5): a deny-list of the benchmarks' own sources, applied to the
deliverables agents' web.

An agent with the web could search for the benchmark itself (its papers, its dataset pages, its
repositories) and read answers instead of working them out. The deny-list holds those sources:

* URL rules (`DenyRule`): `host/path` prefixes (a `*` matches within one path segment), matched
  case-insensitively on any scheme, on the host and its subdomains, on whole path segments
  (`github.com/OxRML/MADQA` denies `.../MADQA/blob/...`, not `.../MADQA-other`). The built-in
  rules name the papers' arXiv pages where the paper's id is known, the three datasets' Hugging
  Face pages and API, and the official repositories (github, raw, codeload, the API); users add
  more with `--deny-url PATTERN` or `--deny-url @FILE` (one pattern a line, `#` comments).
* Names (`BENCHMARK_NAMES`): the benchmarks' names and the papers' titles. A search query that
  names one is recorded as such (it still runs: a query is not yet a peek); a hit whose title or
  snippet names one is removed like a hit on a denied URL; a fetched page whose opening names a
  paper's title is refused (an arXiv page or a mirror of a paper whose id deskbench does not know).

Applied where deskbench sees the traffic (`GuardedWeb`, wrapping any --web backend): a fetch of a
denied URL is refused with a tool error the agent reads, searches lose their denied hits, and
each attempt is kept in the step's result under `peeking`. The deep-research agents search on
their provider's side: Anthropic's web_search is sent the rules as `blocked_domains`; OpenAI's
deep research (web_search_preview) and Gemini's Interactions API take no deny-list, so what their
searches returned and what they cited is checked after the episode (`flag_sources`) and a
`peeking` step names every denied source seen. `peeking_counts` counts all of these for `score`
and the report. On by default; `--allow-peeking` turns it off (named in the run's protocol notes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from deskbench.errors import UserError
from deskbench.runs.protocol import ProtocolNote, deskbench
from deskbench.runs.store import RunStore
from deskbench.tasks.trajectory import ToolCallStep, TrajectoryStep
from deskbench.tracks.deliverables.web_backend import Page, SearchHit, WebBackend, WebError

PEEKING = "peeking"  # the key of a web step's result that records a denied attempt; also a step's name

# arXiv ids known for the papers (the MADQA paper: arxiv.org/abs/2603.12180); the AIDABench and
# consulting papers' texts name no id of their own: their titles are denied instead (below)
PAPER_IDS = ("2603.12180",)
DATASETS = ("OxRML/MADQA", "MichaelYang-lyx/AIDA", "deccan-ai/dra-bench")
REPOSITORIES = ("OxRML/MADQA", "Snowflake-Labs/MADQA", "MichaelYang-lyx/AIDABench", "tanm-ast-deccan/dra-response-gen")
SPACES = ("Snowflake/MADQA-Leaderboard",)
PAPER_TITLES = (
    "strategic navigation or stochastic search",  # MADQA
    "aidabench: ai data analytics benchmark",
    "evaluating deep research agents on expert consulting work",  # the consulting (DRA) paper
)
BENCHMARK_NAMES = ("madqa", "aidabench", "dra-bench", "dra-response-gen", *PAPER_TITLES)
OPENING_CHARS = 3_000  # a fetched page's opening where a paper's title means the paper itself


def peeking_key() -> str:
    """PEEKING, for modules whose UPPER_CASE names are prompt material (runs/identity.py prompt_hash)."""
    return PEEKING


def builtin_patterns() -> list[str]:
    """The benchmarks' own sources as URL rules (what `--allow-peeking` turns off)."""
    out = [f"{host}/{kind}/{pid}{version}" for pid in PAPER_IDS for host in ("arxiv.org", "alphaxiv.org")
           for kind in ("abs", "pdf", "html") for version in ("", "v*")]  # 2603.12180 and 2603.12180v2
    out += [f"huggingface.co/papers/{pid}" for pid in PAPER_IDS]
    for d in DATASETS:
        out += [f"huggingface.co/datasets/{d}", f"huggingface.co/api/datasets/{d}", f"hf.co/datasets/{d}"]
    out += [f"huggingface.co/spaces/{s}" for s in SPACES]
    for r in REPOSITORIES:
        out += [f"github.com/{r}", f"raw.githubusercontent.com/{r}", f"codeload.github.com/{r}",
                f"api.github.com/repos/{r}"]
    return out


# ---- rules -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DenyRule:
    """One `host/path` prefix; `pattern` as the user wrote it (without a scheme)."""

    pattern: str
    host: str
    path: re.Pattern[str]

    @classmethod
    def parse(cls, text: str, where: str = "--deny-url") -> DenyRule:
        raw = text.strip()
        bare = re.sub(r"^[a-z][a-z0-9+.-]*://", "", raw, flags=re.IGNORECASE)
        host, _, path = bare.partition("/")
        host = host.casefold().removeprefix("www.")
        if not host or any(c.isspace() for c in bare) or "*" in host or "." not in host:
            raise UserError(f"{where} {text!r} is not a URL pattern; give host/path, e.g. github.com/OxRML/MADQA "
                            "(a * matches inside one path segment)")
        segments = [re.escape(s).replace(r"\*", "[^/]*") for s in path.strip("/").split("/") if s]
        regex = "".join(f"/{s}" for s in segments)
        return cls(pattern=f"{host}/{path.strip('/')}".rstrip("/"), host=host,
                   path=re.compile(f"{regex}(?:/|$)", re.IGNORECASE))

    def matches(self, url: str) -> bool:
        try:
            parts = urlsplit(url.strip() if "://" in url else f"https://{url.strip()}")
            host = (parts.hostname or "").casefold()
        except ValueError:
            return False
        if host != self.host and not host.endswith(f".{self.host}"):
            return False
        return self.path.match(parts.path or "/") is not None

    @property
    def domain(self) -> str | None:
        """The rule as a provider's blocked-domain entry (`host/path`, no wildcard), None when it has one."""
        return None if "*" in self.pattern else self.pattern


def _names_pattern(names: Iterable[str]) -> re.Pattern[str]:
    """Whole words, a hyphen also written as a space or nothing (DRA-bench, DRA bench, DRAbench)."""
    alternatives = sorted((re.escape(" ".join(n.casefold().split())).replace(r"\-", "[- ]?") for n in names),
                          key=len, reverse=True)
    return re.compile(rf"(?<![\w-])(?:{'|'.join(alternatives)})(?![\w-])")


@dataclass(frozen=True)
class DenyList:
    """The rules and names a run's web is held to (`--deny-url` adds rules)."""

    rules: tuple[DenyRule, ...]
    names: tuple[str, ...] = BENCHMARK_NAMES
    added: tuple[str, ...] = ()  # the user's own patterns, as given (for the protocol notes)
    _names: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names", _names_pattern(self.names))

    @classmethod
    def default(cls, extra: Sequence[str] = ()) -> DenyList:
        builtin = [DenyRule.parse(p) for p in builtin_patterns()]
        added = [DenyRule.parse(p) for p in extra]
        return cls(rules=tuple(builtin + added), added=tuple(r.pattern for r in added))

    def rule_for(self, url: str) -> str | None:
        """The pattern that denies `url`, or None."""
        return next((r.pattern for r in self.rules if r.matches(url)), None)

    def named(self, text: str) -> str | None:
        """The benchmark name or paper title `text` names, or None."""
        found = self._names.search(" ".join(text.casefold().split()))
        return found.group(0) if found else None

    def titled(self, text: str) -> str | None:
        """The paper title `text` names (a page that opens with one is the paper or a copy), or None."""
        flat = " ".join(text.casefold().split())
        return next((t for t in PAPER_TITLES if t in self.names and t in flat), None)

    def hit_reason(self, hit: SearchHit) -> str | None:
        rule = self.rule_for(hit.url)
        if rule is not None:
            return rule
        name = self.named(f"{hit.title}\n{hit.snippet}")
        return f"names {name!r}" if name else None

    def digest(self) -> str:
        """What identifies the list (a run resumed under another list is another protocol)."""
        text = "\n".join(sorted(r.pattern.casefold() for r in self.rules)) + "\n--\n" + "\n".join(sorted(self.names))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def blocked_domains(self) -> list[str]:
        """The rules a provider's blocked-domains field can carry (no wildcard), each once."""
        return list(dict.fromkeys(d for r in self.rules if (d := r.domain) is not None))

    def describe(self) -> str:
        added = f", plus {', '.join(self.added)} (--deny-url)" if self.added else ""
        return (f"deny-list {self.digest()}: {len(self.rules) - len(self.added)} URL rules of the benchmarks' own papers, "
                f"dataset pages and repositories{added}, and their names and titles in search hits")


def parse_deny(values: Sequence[str], *, allow_peeking: bool) -> DenyList | None:
    """`--deny-url PATTERN` / `--deny-url @FILE` (repeatable) and `--allow-peeking`; None: no deny-list."""
    if allow_peeking:
        if values:
            raise UserError("--deny-url adds to the deny-list that --allow-peeking turns off; give one of them")
        return None
    patterns: list[str] = []
    for value in values:
        if not value.startswith("@"):
            patterns.append(value)
            continue
        path = Path(value[1:])
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--deny-url {value}: cannot read {path} ({getattr(exc, 'strerror', None) or exc}); "
                            "give a UTF-8 text file with one URL pattern a line") from None
        for n, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if text:
                DenyRule.parse(text, where=f"{path} line {n}:")
                patterns.append(text)
    return DenyList.default(patterns)


# how each deep-research agent's own search is held to the list (without --web)
PROVIDER_SIDE = {
    "claude-research": "sent to Anthropic's web_search as blocked_domains (globs left out), its results also "
                       "checked after the episode",
    "openai-deep-research": "checked after the episode: OpenAI's web_search_preview takes no deny-list",
    "gemini-deep-research": "checked after the episode: Gemini's Interactions API takes no deny-list",
}


def no_peeking_note(deny: DenyList | None, provider_agent: str | None = None) -> ProtocolNote:
    """The run's protocol note. Neither way is the papers': they ran before their benchmarks were
    public, so there was nothing to peek at; the deny-list keeps it so."""
    if deny is None:
        return deskbench("no peeking", "off (--allow-peeking): the benchmarks' own papers, datasets and repositories "
                                       "are reachable, as they were not when the papers ran")
    how = PROVIDER_SIDE.get(provider_agent or "", "deskbench's web tools refuse denied fetches and drop denied hits")
    return deskbench("no peeking", f"{deny.describe()}; {how}; every attempt recorded (--allow-peeking to turn off)")


# ---- the guarded web -------------------------------------------------------------------------

class WebBlocked(WebError):
    """A fetch the deny-list refused: the agent reads it as the tool's answer."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url} is one of the benchmark's own sources and is blocked in this run "
                         f"(deny-list: {reason}); use other sources")
        self.url, self.reason = url, reason


@dataclass
class Screened:
    """A search as the deny-list left it: the hits kept, those removed, a benchmark name the query used."""

    hits: list[SearchHit]
    removed: list[dict[str, str]]
    named: str | None

    def record(self) -> dict[str, Any] | None:
        if not self.removed and self.named is None:
            return None
        return {"action": "filtered", "removed": self.removed, "query_names": self.named}


class GuardedWeb:
    """A web backend held to a deny-list: fetches of denied URLs refused, denied hits removed."""

    def __init__(self, inner: WebBackend, deny: DenyList) -> None:
        self.inner, self.deny = inner, deny
        self.name = inner.name

    async def screened_search(self, query: str, count: int) -> Screened:
        hits = await self.inner.search(query, count)
        kept: list[SearchHit] = []
        removed: list[dict[str, str]] = []
        for hit in hits:
            reason = self.deny.hit_reason(hit)
            if reason is None:
                kept.append(hit)
            else:
                removed.append({"url": hit.url, "rule": reason})
        return Screened(kept, removed, self.deny.named(query))

    async def search(self, query: str, count: int) -> list[SearchHit]:
        return (await self.screened_search(query, count)).hits

    async def fetch(self, url: str) -> Page:
        rule = self.deny.rule_for(url)
        if rule is not None:
            raise WebBlocked(url, rule)
        page = await self.inner.fetch(url)
        rule = self.deny.rule_for(page.url)
        if rule is not None:  # a redirect into a denied source
            raise WebBlocked(page.url, rule)
        title = self.deny.titled(page.text[:OPENING_CHARS])
        if title is not None:
            raise WebBlocked(page.url, f"the page opens with a benchmark paper's title ({title!r})")
        return page

    async def aclose(self) -> None:
        await self.inner.aclose()


def guarded(backend: WebBackend, deny: DenyList | None) -> WebBackend:
    return GuardedWeb(backend, deny) if deny is not None else backend


# ---- after the fact, and counting -----------------------------------------------------------

def _seen_urls(steps: Sequence[TrajectoryStep]) -> list[tuple[str, str]]:
    """(url, where) for every URL a step says the agent got: search results, fetched pages, citations."""
    seen: list[tuple[str, str]] = []
    for step in steps:
        if not isinstance(step, ToolCallStep) or step.name == PEEKING:
            continue
        result = step.result
        for hit in result.get("results") or []:
            if isinstance(hit, dict) and isinstance(hit.get("url"), str):
                seen.append((hit["url"], f"{step.name} result"))
        if step.name in ("fetch", "find_in_page") and isinstance(result.get("url"), str) and "error" not in result:
            seen.append((result["url"], step.name))
        for key in ("cited", "citations"):
            for c in result.get(key) or []:
                url = (c.get("url") or c.get("cited")) if isinstance(c, dict) else None
                if isinstance(url, str):
                    seen.append((url, "citation"))
    return seen


URL_IN_TEXT = re.compile(r"https?://[^\s<>()\[\]\"'`]+")


def _queries(step: ToolCallStep) -> list[str]:
    """A search step's queries: deskbench's and OpenAI's `query`, Gemini's `queries`."""
    asked = step.arguments.get("queries")
    listed = [q for q in asked if isinstance(q, str)] if isinstance(asked, list) else []
    one = step.arguments.get("query")
    return [one, *listed] if isinstance(one, str) else listed


def flag_sources(steps: Sequence[TrajectoryStep], deny: DenyList, provider: str,
                 deliverable: str = "") -> ToolCallStep | None:
    """A `peeking` step naming every denied source an episode's own steps show it got, or its
    deliverable cites (a provider's search the deny-list could not be sent to), and every query
    naming the benchmark that no deny-list saw; None when there is none."""
    found: dict[str, dict[str, str]] = {}
    cited = [(m.group(0).rstrip(".,;:"), "the deliverable") for m in URL_IN_TEXT.finditer(deliverable)]
    for url, where in [*_seen_urls(steps), *cited]:
        rule = deny.rule_for(url)
        if rule is not None and url not in found:
            found[url] = {"url": url, "rule": rule, "seen_in": where}
    queries = [q for s in steps if isinstance(s, ToolCallStep) and s.name == "web_search" and PEEKING not in s.result
               for q in _queries(s) if deny.named(q)]
    if not found and not queries:
        return None
    return ToolCallStep(name=PEEKING, arguments={"provider": provider}, result={PEEKING: {
        "action": "flagged", "seen": list(found.values()), "queries": queries}})


class PeekingCounts(BaseModel):
    """Denied attempts of a system's episodes (`score`, the report)."""

    episodes: int = 0  # episodes with at least one
    fetches_blocked: int = 0
    hits_removed: int = 0
    queries_naming: int = 0  # searches whose query named the benchmark
    sources_seen: int = 0  # denied sources found after the episode (a provider's search, the deliverable's citations)

    @property
    def total(self) -> int:
        return self.fetches_blocked + self.hits_removed + self.queries_naming + self.sources_seen

    def add(self, other: PeekingCounts) -> PeekingCounts:
        return PeekingCounts(**{k: getattr(self, k) + getattr(other, k) for k in PeekingCounts.model_fields})

    def describe(self) -> str:
        return (f"{self.total} denied attempt(s) in {self.episodes} episode(s): {self.fetches_blocked} fetch(es) blocked, {self.hits_removed} hit(s) "
                f"removed, {self.queries_naming} quer(ies) naming the benchmark, {self.sources_seen} denied "
                "source(s) found after the episode")


def peeking_counts(steps: Sequence[TrajectoryStep]) -> PeekingCounts:
    """One episode's denied attempts, read from its steps."""
    fetches = hits = queries = seen = 0
    for step in steps:
        if not isinstance(step, ToolCallStep):
            continue
        record = step.result.get(PEEKING)
        if not isinstance(record, dict):
            continue
        action = record.get("action")
        if action == "blocked":
            fetches += 1
        elif action == "filtered":
            hits += len(record.get("removed") or [])
            queries += record.get("query_names") is not None
        elif action == "flagged":
            seen += len(record.get("seen") or [])
            queries += len(record.get("queries") or [])
    any_ = fetches + hits + queries + seen > 0
    return PeekingCounts(episodes=int(any_), fetches_blocked=fetches, hits_removed=hits, queries_naming=queries,
                         sources_seen=seen)


def peeking_by_system(store: RunStore, systems: Sequence[str]) -> dict[str, PeekingCounts]:
    """Each system's denied attempts over all its episodes and attempts: the systems the deny-list
    applied to (their run-side "no peeking" note) and any other with an attempt on record."""
    from deskbench.runs.protocol import stored_protocol

    notes = stored_protocol(store)
    out: dict[str, PeekingCounts] = {}
    for system in systems:
        total = PeekingCounts()
        for episode in store.iter_episodes(system):
            total = total.add(peeking_counts(episode.trajectory))
        if total.total or any(n.aspect == "no peeking" for n in notes.get(system, [])):
            out[system] = total
    return out
