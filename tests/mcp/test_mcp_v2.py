"""The MCP SDK's majors: `deskbench mcp` and `--agent external` serve with mcp 1.x (FastMCP) and
2.x (MCPServer, FastMCP renamed); an installed release of neither is said as unsupported, in one
line with its fix, instead of as a missing extra (with mcp 2.3 installed, deskbench used to say
"needs the mcp extra" because it imported mcp.server.fastmcp, which 2.x removed).

With 2.x, a client in its default mode ('auto') first probes the sessionless 2026-07-28 protocol;
the server answers it 400, so the client falls back to the initialize handshake and has a session,
which its episode belongs to (server.OneEpisode)."""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from deskbench import requirements
from deskbench.requirements import MCP, McpSdk, mcp_major

if TYPE_CHECKING:
    from deskbench.mcp.server import McpTool


@pytest.fixture(scope="module", autouse=True)
def _mcp_sdk() -> None:
    """Skipped without the MCP SDK, checked when these tests run: importing it (with starlette and
    uvicorn, about 1-2 s) at module level made every xdist worker pay at collection."""
    pytest.importorskip("mcp")


@pytest.mark.parametrize(("version", "said"), [
    ("3.0.0", "mcp 3.0.0 is installed"),
    ("1.9.4", "mcp 1.9.4 is installed"),
    ("0.9.1", "mcp 0.9.1 is installed"),
])
def test_an_unsupported_release_is_said_as_such(monkeypatch: pytest.MonkeyPatch, version: str, said: str) -> None:
    monkeypatch.setattr(requirements, "installed_version", lambda package: version)
    line = McpSdk().problem("deskbench mcp")
    assert line == (f"deskbench mcp supports the MCP SDK 1.x (from 1.10) and 2.x, and {said}: "
                    "pip install 'deskbench[mcp]'")


def test_the_installed_release_is_supported_and_its_server_loads() -> None:
    assert mcp_major() in (1, 2)
    assert MCP.problem("deskbench mcp") is None


def test_a_missing_sdk_is_the_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requirements, "installed_version", lambda package: None)
    assert McpSdk().problem("--agent external") == "--agent external needs the mcp extra: pip install 'deskbench[mcp]'"


def _tools() -> tuple[list[McpTool], list[str]]:
    from deskbench.mcp.server import McpTool, OneEpisode, Refused

    episode: OneEpisode[list[str]] = OneEpisode([])

    async def note(text: str) -> str:
        """Appends to the episode of the session that owns it."""
        episode.current().append(text)
        return f"noted {text}"

    async def refuse(reason: str) -> str:
        raise Refused(f"refused: {reason}")

    return [McpTool(note, "note a text"), McpTool(refuse, "always refused")], episode.session


def test_a_2x_client_in_its_default_mode_gets_a_session_and_the_errors_deskbench_says() -> None:
    """mcp 2.x's own Client (mode 'auto'): the modern probe is refused, the handshake follows; the
    episode is the session's; a Refused's message reaches the agent as the tool's error."""
    if mcp_major() != 2:
        pytest.skip("mcp 2.x's Client")
    from mcp import Client

    from deskbench.mcp.server import build_server, serve_http

    tools, notes = _tools()

    async def main() -> tuple[list[str], str, bool]:
        async with serve_http(build_server("t", tools)) as url, Client(url) as client:
            texts = []
            for word in ("one", "two"):
                result = await client.call_tool("note", {"text": word})
                texts.append(result.content[0].text)  # type: ignore[union-attr]
            refused = await client.call_tool("refuse", {"reason": "no"})
            return texts, refused.content[0].text, refused.is_error  # type: ignore[union-attr]

    texts, refused, is_error = asyncio.run(asyncio.wait_for(main(), 60))
    assert texts == ["noted one", "noted two"] and notes == ["one", "two"]
    assert is_error and "refused: no" in refused


def test_a_sessionless_request_is_answered_400_with_the_way_in() -> None:
    """A request of the 2026-07-28 protocol (no session) gets 400 and says how to connect."""
    if mcp_major() != 2:
        pytest.skip("the 2026-07-28 protocol is mcp 2.x's")
    from deskbench.mcp.server import build_server, serve_http

    tools, _ = _tools()

    async def main() -> tuple[int, str]:
        async with serve_http(build_server("t", tools)) as url:
            parts = urlsplit(url)

            def post() -> tuple[int, str]:
                conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=20)
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
                conn.request("POST", parts.path, body=body, headers={
                    "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                    "Mcp-Protocol-Version": "2026-07-28"})
                response = conn.getresponse()
                return response.status, response.read().decode()

            return await asyncio.to_thread(post)

    status, text = asyncio.run(asyncio.wait_for(main(), 60))
    assert status == 400 and "initialize" in text
