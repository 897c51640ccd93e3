"""What a part of deskbench needs from this machine, checked before anything is created.

An agent lists its needs in a `requires()` method (an optional hook: `agent_requirements`), an
executor or a command in a table beside it; `check(what, needs)` turns the first unmet one into a
UserError of one line with its fix (`--agent external needs the mcp extra: pip install
'deskbench[mcp]'`), so a run that cannot work stops before its run directory exists instead of
storing every episode as the same error. Each need is cheap to check and never depends on timing:
an import, a lookup on PATH, an environment variable, a connect to a port on this machine.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from deskbench.errors import UserError


class Need(Protocol):
    def problem(self, what: str) -> str | None:
        """None when met, else the one line (what is missing, how to fix it) said for `what`."""


@dataclass(frozen=True)
class Extra:
    """A module of one of deskbench's optional extras (pyproject's [project.optional-dependencies]).
    It is imported, so a broken or wrong-version install is caught too; `load=False` only looks
    for it, for a package whose import must wait (ray reads its environment when imported)."""

    module: str
    extra: str
    load: bool = True

    def problem(self, what: str) -> str | None:
        try:
            if self.load:
                importlib.import_module(self.module)
            elif importlib.util.find_spec(self.module) is None:
                raise ModuleNotFoundError(f"No module named {self.module!r}", name=self.module)
        except ImportError as exc:
            missing = exc.name or ""
            top = self.module.split(".")[0]
            # the extra itself is absent, or one of its own dependencies is broken: say which
            cause = "" if missing == top or missing.startswith(f"{top}.") or not missing else f" ({exc})"
            return f"{what} needs the {self.extra} extra{cause}: pip install 'deskbench[{self.extra}]'"
        return None


@dataclass(frozen=True)
class Executable:
    """A program: a path (with a slash) that must be an executable file, or a name found on PATH."""

    program: str
    fix: str

    def problem(self, what: str) -> str | None:
        if "/" in self.program:
            if os.path.isfile(self.program) and os.access(self.program, os.X_OK):
                return None
            return f"{what}: {self.program} is not an executable file; {self.fix}"
        if shutil.which(self.program) is None:
            return f"{what}: {self.program!r} is not found on PATH; {self.fix}"
        return None


@dataclass(frozen=True)
class EnvKey:
    """An API key read from an environment variable."""

    var: str
    fix: str

    def problem(self, what: str) -> str | None:
        return None if os.environ.get(self.var) else f"{what} needs an API key in ${self.var}; {self.fix}"


def installed_version(package: str) -> str | None:
    """The installed release of a distribution (its metadata), None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def mcp_major() -> int:
    """The installed MCP SDK's major release (1 or 2; 0 when absent or unreadable)."""
    version = installed_version("mcp") or ""
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


# the module of each supported major's server: 1.x FastMCP (from 1.10), 2.x MCPServer (FastMCP renamed)
MCP_SERVERS = {1: "mcp.server.fastmcp", 2: "mcp.server.mcpserver"}


@dataclass(frozen=True)
class McpSdk:
    """The MCP SDK of the mcp extra, at a release deskbench serves with (1.10 and later 1.x, 2.x;
    tested with 1.30 and 2.3): an unsupported one is said as such, not as a missing extra."""

    def problem(self, what: str) -> str | None:
        version = installed_version("mcp")
        if version is None:
            return f"{what} needs the mcp extra: pip install 'deskbench[mcp]'"
        minor = version.split(".")[1:2]
        too_old = mcp_major() == 1 and bool(minor) and minor[0].isdigit() and int(minor[0]) < 10
        if mcp_major() not in MCP_SERVERS or too_old:
            return (f"{what} supports the MCP SDK 1.x (from 1.10) and 2.x, and mcp {version} is installed: "
                    "pip install 'deskbench[mcp]'")
        return Extra(MCP_SERVERS[mcp_major()], "mcp").problem(what)


MCP = McpSdk()  # --agent external, deskbench mcp: the MCP server (mcp 1.x FastMCP, 2.x MCPServer)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Listening:
    """A service at an http(s) URL on this machine: something accepts connections on its port. A
    URL on another host is not probed (a lookup or a connect there can hang: that is timing)."""

    url: str

    def problem(self, what: str) -> str | None:
        from deskbench.redact import redact_url

        parts, shown = urlsplit(self.url), redact_url(self.url)
        host = parts.hostname or ""
        if host not in LOOPBACK:
            return None
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return f"{what}: {shown} has no valid port; give e.g. http://127.0.0.1:8080/episode"
        try:
            with socket.create_connection((host, port), timeout=5):
                return None
        except ConnectionRefusedError:
            return (f"{what}: nothing listens on {host}:{port} ({shown}); start your agent's service first, "
                    "or check the port")
        except OSError:
            return None  # not refused (a firewall, a slow stack): the episodes will say what happens


def check(what: str, needs: Iterable[Need]) -> None:
    """Raise a UserError of one line for the first unmet need, said for `what` ("--agent external")."""
    for need in needs:
        problem = need.problem(what)
        if problem:
            raise UserError(problem)


@runtime_checkable
class HasRequirements(Protocol):
    """An agent (built-in or a plugin's) that needs something beyond Python: an extra, a program,
    a key, a service. Called once the agent has its options (`configure`)."""

    def requires(self) -> Sequence[Need]: ...


def check_agent(name: str, agent: object) -> None:
    """An agent's `requires()`, when it has one, checked for `--agent NAME`."""
    if isinstance(agent, HasRequirements):
        check(f"--agent {name}", agent.requires())
