"""The official MCP client's few calls the tests and their agents make, the same under mcp 1.x and
2.x: 2.x keeps only `streamable_http_client` (late 1.x has it too, yielding a third item), which
takes its headers through an HTTP client, and 2.x snake-cased the results' fields (`isError` is
`is_error`). No deskbench import: the external agents use it as a user's agent uses the SDK.
Scripts outside tests/ put tests/ on sys.path and import it as `mcp_client`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


@asynccontextmanager
async def streamablehttp_client(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[tuple[Any, Any, None]]:
    """(read, write, None) of a streamable HTTP connection to `url`, as mcp 1.x's function of this
    name yields them (its third item, the session id getter, is not used by the tests)."""
    try:
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    except ImportError:  # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client as v1_client

        async with v1_client(url, headers=headers) as (read, write, _):
            yield read, write, None
        return
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as streams:  # 2.x: two; late 1.x: three
        yield streams[0], streams[1], None


def is_error(result: Any) -> bool:
    """A tool call's result is an error (2.x `is_error`, 1.x `isError`)."""
    value = getattr(result, "is_error", None)
    return bool(value if value is not None else getattr(result, "isError", False))
