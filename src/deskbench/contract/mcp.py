"""A track's tools over MCP outside a run, as `deskbench mcp` asks for them (Track.mcp_tools).

`deskbench mcp` (cli/mcp.py, mcp/standalone.py) serves one track's tools to an agent the user
starts, over a corpus (--corpus) or for one task of a tasks file (--tasks). The track whose
`McpTools` serves that kind of source builds an `McpServed`: the server's name and instructions,
its tools, and a session for each episode. The core runs the server, gives each MCP session its
episode and stores it. So the command names no track, and a fourth track's tools live in its folder.

Nothing of deskbench at run time: every core module and track may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    from deskbench.mcp.server import McpTool, SessionSource
    from deskbench.runs.store import RunStore

S = TypeVar("S")


@dataclass(frozen=True)
class McpRequest:
    """`deskbench mcp`'s flags as the track needs them, and the run store episodes go to."""

    store: RunStore  # the --out run directory (episodes stored as system 'external')
    source: Path  # --corpus DIR or --tasks PATH (which one: the method called)
    task: str | None = None  # --task: the task served (None: the first)
    max_rounds: int = 20  # --max-rounds: tool calls an episode may make
    question: str = ""  # --question: the question asked over a corpus
    top_k: int = 5  # --top-k: pages per search over a corpus
    retriever: str = "bm25"  # --retriever: what a search over a corpus runs on (search/retriever.py spec)
    retriever_download: bool = False  # --retriever-download: its model may be fetched from the hub


class McpServed(Protocol[S]):
    """What one track serves outside a run: its tools, the server's instructions (the task's
    prompt), and a new session for each episode with the task id and attempt it is stored under."""

    server_name: str
    instructions: str | None

    def tools(self, source: SessionSource[S]) -> list[McpTool]: ...

    def next(self) -> tuple[str, int, S]: ...


class McpTools:
    """A track's tools for `deskbench mcp`. Subclass it: say which sources it serves and override
    the matching method; a source it does not serve is refused by the core in one line, before
    the run directory is made."""

    serves_corpus: ClassVar[bool] = False  # --corpus DIR
    serves_tasks: ClassVar[bool] = False  # --tasks PATH of this track

    def corpus(self, request: McpRequest) -> McpServed[Any]:
        """What is served over the corpus at `request.source` (a user's mistake: a UserError)."""
        raise NotImplementedError

    def tasks(self, request: McpRequest) -> McpServed[Any]:
        """What is served for one task (`request.task`, else the first) of the tasks file or
        folder at `request.source` (a user's mistake: a UserError)."""
        raise NotImplementedError
