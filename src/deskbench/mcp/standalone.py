"""`deskbench mcp` outside a run: the agent is the user's to start, so each answer ends an
episode (stored at once under system 'external') and the next call starts a new one.

What is served is the track's (Track.mcp_tools, contract/mcp.py): over a corpus (docqa's) the
episodes are questions of the user's; over a tasks file or a package folder (analytics',
deliverables') the episodes are attempts at one task (`--task`, else the first), each stored as
the next attempt (`TaskServed`), scored by `deskbench score RUNDIR` like a run's; the task's
prompt is the server's instructions, sent to the client when it connects.

Each MCP session (over HTTP, each mcp-session-id; on stdio, the one client) has its own episode:
a session's first tool call opens one, its answer stores it, and a call can only ever reach its
own session's episode, so client B's provide_answer answers B's episode (holding B's calls
only), never A's. A server opens at most --max-episodes episodes (an open one counts: it may be
answered) and runs at most --max-calls-per-second tool calls (a token bucket; a call over it is
refused with a request to slow down, never queued)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from deskbench.contract.mcp import McpRequest, McpServed
from deskbench.errors import UserError
from deskbench.mcp.external import EpisodeSession
from deskbench.mcp.server import (
    McpTool,
    Refused,
    SessionSource,
    TokenBucket,
    build_server,
    caller,
    serve,
)
from deskbench.runs.store import RunStore, now

if TYPE_CHECKING:
    from deskbench.contract.mcp import McpTools
    from deskbench.contract.track import Track

SYSTEM = "external"
S = TypeVar("S", bound=EpisodeSession)
MAX_EPISODES = 1000  # episodes one server opens (--max-episodes)
MAX_CALLS_PER_SECOND = 20.0  # tool calls a second for one server, all sessions together (--max-calls-per-second)


@dataclass
class OpenEpisode(Generic[S]):
    """An MCP session's episode until its answer: where it is stored, and its tools' session."""

    task_id: str
    attempt: int
    session: S
    started: str  # ISO 8601 UTC (runs/store.py now)


class Episodes(Generic[S]):
    """Each MCP session's own episode, opened at its first tool call and stored at its answer
    (the session's next call opens another). Every call passes the server's rate limit first; a
    refused call reaches no episode."""

    def __init__(self, store: RunStore, served: McpServed[S], *, max_episodes: int = MAX_EPISODES,
                 bucket: TokenBucket | None = None) -> None:
        self.store, self.served, self.max_episodes = store, served, max_episodes
        self.bucket = bucket if bucket is not None else TokenBucket(MAX_CALLS_PER_SECOND)
        self.open: dict[str, OpenEpisode[S]] = {}  # MCP session -> its episode; at most max_episodes
        self.opened = 0

    def current(self) -> S:
        if not self.bucket.take():
            raise Refused(f"too many calls: this server runs at most {self.bucket.rate:g} tool calls a second "
                          "(deskbench mcp --max-calls-per-second); slow down and call again")
        who = caller()
        episode = self.open.get(who)
        if episode is None:
            if self.opened >= self.max_episodes:
                raise Refused(f"this server has opened its {self.max_episodes} episodes (deskbench mcp "
                              "--max-episodes); start another server for more")
            self.opened += 1
            started = now()
            task_id, attempt, session = self.served.next()
            episode = self.open[who] = OpenEpisode(task_id, attempt, session, started)
        return episode.session

    async def answered(self, session: S) -> None:
        """Store the episode `session` belongs to (once: a second report of it is ignored)."""
        from deskbench.runs.runner import EndedEpisode, RunCounts, commit_episode

        who = next((k for k, e in self.open.items() if e.session is session), None)
        if who is None:
            return
        episode = self.open.pop(who)
        ended = EndedEpisode(result=session.result(), started_at=episode.started, finished_at=now())
        commit_episode(self.store, SYSTEM, episode.task_id, episode.attempt, ended, RunCounts(), replace=True)


class TaskServed(Generic[S]):
    """One task of a tasks file or package folder: each episode the next attempt at it, its
    output files in the run's episode folder as a run's are."""

    def __init__(self, store: RunStore, task_id: str, server_name: str, instructions: str,
                 tools: Callable[[SessionSource[S]], list[McpTool]], session: Callable[[Path], S]) -> None:
        self.store, self.task_id, self.server_name = store, task_id, server_name
        self.instructions: str | None = instructions
        self._tools, self._session = tools, session
        self.attempt = max((e.attempt + 1 for e in store.episodes(SYSTEM) if e.task_id == task_id), default=0)

    def tools(self, source: SessionSource[S]) -> list[McpTool]:
        return self._tools(source)

    def next(self) -> tuple[str, int, S]:
        from deskbench.runs.runner import episode_dir

        attempt = self.attempt
        self.attempt += 1
        return self.task_id, attempt, self._session(episode_dir(self.store.dir, SYSTEM, self.task_id, attempt))


def pick(ids: list[str], wanted: str | None, where: Path) -> str:
    """--task ID among the file's tasks, else the first."""
    if not ids:
        raise UserError(f"--tasks {where} holds no task; give a file with at least one")
    if wanted is None:
        return ids[0]
    if wanted not in ids:
        shown = ", ".join(ids[:10]) + (", ..." if len(ids) > 10 else "")
        raise UserError(f"--task {wanted!r} is not in {where}; its tasks: {shown}")
    return wanted


@dataclass(frozen=True)
class ServerLimits:
    """What one `deskbench mcp` server allows: episodes opened, tool calls a second."""

    max_episodes: int = MAX_EPISODES
    calls_per_second: float = MAX_CALLS_PER_SECOND


async def serve_corpus(corpus: Path, out: Path, *, transport: str, port: int, question: str, top_k: int,
                       limits: ServerLimits = ServerLimits(), retriever: str = "bm25",
                       retriever_download: bool = False) -> None:
    from deskbench.contract.registry import tracks

    served = [(t, tools) for t, tools in _tools(tracks().values()) if tools.serves_corpus]
    if not served:
        raise UserError(f"deskbench mcp --corpus: no track serves a corpus over MCP; give --tasks PATH "
                        f"(the tracks that serve tasks: {_names_serving_tasks()})")
    store = RunStore(out)
    request = McpRequest(store=store, source=corpus, question=question, top_k=top_k, retriever=retriever,
                         retriever_download=retriever_download)
    await _serve(served[0][1].corpus(request), store, transport, port, limits)


async def serve_tasks(tasks: Path, out: Path, *, task: str | None, transport: str, port: int, max_rounds: int = 20,
                      limits: ServerLimits = ServerLimits()) -> None:
    from deskbench.contract.registry import track_for

    track = track_for(tasks, [SYSTEM])
    tools = track.mcp_tools()
    if tools is None or not tools.serves_tasks:
        fix = f": for {track.name} give --corpus DIR" if tools is not None and tools.serves_corpus else ""
        raise UserError(f"deskbench mcp --tasks serves {_names_serving_tasks()} tasks; {tasks} is "
                        f"{track.name}'s{fix}")
    store = RunStore(out)
    request = McpRequest(store=store, source=tasks, task=task, max_rounds=max_rounds)
    await _serve(tools.tasks(request), store, transport, port, limits)


def _tools(tracks: Iterable[Track]) -> list[tuple[Track, McpTools]]:
    """Each track that serves tools over MCP, with them, in the registry's order."""
    return [(t, tools) for t in tracks if (tools := t.mcp_tools()) is not None]


def _names_serving_tasks() -> str:
    from deskbench.contract.registry import tracks

    names = [t.name for t, tools in _tools(tracks().values()) if tools.serves_tasks]
    return " and ".join(names) if names else "no track's"


async def _serve(served: McpServed[Any], store: RunStore, transport: str, port: int, limits: ServerLimits) -> None:
    source = Episodes(store, served, max_episodes=limits.max_episodes, bucket=TokenBucket(limits.calls_per_second))
    await serve(build_server(served.server_name, served.tools(source), served.instructions), transport, port)
