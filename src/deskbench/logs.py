"""Who writes to stderr through `logging`: deskbench's own records always; the libraries' (the MCP
server, uvicorn, httpx, anyio, Ray...) only with `--verbose`.

Why: deskbench speaks to the user through its console (one line per problem, a summary per run);
the libraries log for their own developers. Left alone, the MCP server logged a ~44-line
traceback per external-agent episode (`Error in standalone SSE writer ... ClosedResourceError`,
the library's own reaction to a client closing its session: modelcontextprotocol/python-sdk#825)
and FastMCP installed a rich handler on the root logger. `setup` installs one stderr handler on
the root logger first (so a library's `basicConfig` finds one and does nothing), passes only
deskbench's records through it, and raises the known libraries' levels past CRITICAL; with
`--verbose` every record of INFO and above is shown. Every command takes `--verbose`
(cli/grammar.py adds it), so the flag is the same wherever it is written.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

OWN = "deskbench"
HANDLER = "deskbench-stderr"
# libraries deskbench runs that log on their own; quieted at their root, whatever handler is attached
LIBRARIES = ("mcp", "uvicorn", "starlette", "sse_starlette", "fastapi", "httpx", "httpcore", "anyio",
             "asyncio", "aiohttp", "openai", "anthropic", "urllib3", "ray", "inspect_ai", "filelock",
             "matplotlib", "PIL", "fontTools")
SILENT = logging.CRITICAL + 1


class _Stderr(logging.StreamHandler[TextIO]):
    """Writes to the sys.stderr of the moment (a test runner may swap it), not the one at setup."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def _own(record: logging.LogRecord) -> bool:
    return record.name == OWN or record.name.startswith(f"{OWN}.")


def setup(verbose: bool = False) -> None:
    """Quiet the libraries' logs, or (`verbose`) show them with their logger's name. Idempotent."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if h.get_name() == HANDLER), None)
    if handler is None:
        handler = _Stderr()
        handler.set_name(HANDLER)
        root.addHandler(handler)
    handler.filters.clear()
    if verbose:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.addFilter(_own)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else SILENT)


def is_verbose() -> bool:
    """Whether `setup(verbose=True)` is in force (for a library configured on its own, e.g. Ray's)."""
    return logging.getLogger().getEffectiveLevel() <= logging.INFO
