"""A small agent built outside deskbench for the code tracks (analytics, deliverables): it speaks
MCP through the official client library only (no deskbench import), as a user's agent would.

analytics: sums the `amount` column of the CSV input with execute_code, saving the total as
/mnt/result/total.csv, and answers with provide_answer. deliverables: lists the tools, reads the
first input with read_input, writes every file of the folder in $EXTERNAL_FILES to /mnt/result
with execute_code, and submits the text of $EXTERNAL_RESPONSE with submit_deliverable.

greedy: calls execute_code until it is refused, then answers.

Usage: external_code_agent.py analytics|greedy|deliverables QUESTION (the server's URL in $DESKBENCH_MCP_URL)."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import sys
from pathlib import Path

from mcp import ClientSession

try:  # run as a script (tests/ is its sys.path[0]), or imported by a test as tests.external_code_agent
    from mcp_client import is_error, streamablehttp_client  # the SDK's client under mcp 1.x and 2.x
except ImportError:
    from tests.mcp_client import is_error, streamablehttp_client

SUM_CODE = """import glob, pandas as pd
frame = pd.read_csv(glob.glob('/mnt/data/*.csv')[0])
total = frame['amount'].sum()
pd.DataFrame({'total': [total]}).to_csv('/mnt/result/total.csv', index=False)
print(total)
"""


def text_of(result: object) -> str:
    return " ".join(c.text for c in result.content if c.type == "text")  # type: ignore[attr-defined]


async def analytics(session: ClientSession, question: str) -> None:
    ran = await session.call_tool("execute_code", {"code": SUM_CODE})
    if is_error(ran) or "exit status 0" not in text_of(ran):
        sys.exit(f"execute_code failed: {text_of(ran)}")
    total = [line for line in text_of(ran).splitlines() if line.strip().isdigit()][-1].strip()
    await session.call_tool("provide_answer", {"answer": f"The total amount is {total}."})


async def greedy(session: ClientSession, question: str) -> None:
    """Calls execute_code until it is refused (past the budget), then tries to answer."""
    for _ in range(5):
        ran = await session.call_tool("execute_code", {"code": SUM_CODE})
        if is_error(ran):
            break
    await session.call_tool("provide_answer", {"answer": "60"})


async def deliverables(session: ClientSession, question: str) -> None:
    first = re.findall(r"^- /mnt/data/(\S+)", question, re.MULTILINE)[0]
    read = await session.call_tool("read_input", {"name": first})
    if is_error(read) or first not in text_of(read):
        sys.exit(f"read_input({first}) failed: {text_of(read)}")
    lines = ["import base64"]
    for path in sorted(Path(os.environ["EXTERNAL_FILES"]).iterdir()):
        blob = base64.b64encode(path.read_bytes()).decode()
        lines.append(f"open('/mnt/result/{path.name}', 'wb').write(base64.b64decode('{blob}'))")
    ran = await session.call_tool("execute_code", {"code": "\n".join(lines)})
    if is_error(ran):
        sys.exit(f"execute_code failed: {text_of(ran)}")
    response = Path(os.environ["EXTERNAL_RESPONSE"]).read_text(encoding="utf-8")
    await session.call_tool("submit_deliverable", {"response": response})


async def main(track: str, question: str) -> None:
    async with streamablehttp_client(os.environ["DESKBENCH_MCP_URL"]) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        await {"analytics": analytics, "greedy": greedy, "deliverables": deliverables}[track](session, question)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], os.environ.get("DESKBENCH_QUESTION") or sys.argv[2]))
