"""Reading the RLM root model's replies: ```repl``` blocks, FINAL(...), output as it is shown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_REPL_BLOCK = re.compile(r"```repl[ \t]*\r?\n(.*?)(?:\r?\n)?[ \t]*```", re.DOTALL)
_ANY_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_FINAL = re.compile(r"^[ \t>*`-]*FINAL(?P<var>[_.]VAR)?[ \t]*\(", re.MULTILINE)
_QUOTES = ('"""', "'''", '"', "'")


def repl_blocks(text: str) -> list[str]:
    """The ```repl``` blocks of a reply, in order (a block with no code is dropped)."""
    return [m.group(1) for m in _REPL_BLOCK.finditer(text) if m.group(1).strip()]


@dataclass(frozen=True)
class Final:
    kind: Literal["answer", "var"]
    text: str  # the answer, or the variable's name


def find_final(text: str) -> Final | None:
    """The first FINAL(...) / FINAL_VAR(...) / FINAL.VAR(...) that starts a line outside code
    blocks (markdown bullets, quotes and backticks before it allowed, since Prompt 9 shows it
    as a bulleted `FINAL(...)`). Parentheses are balanced, so FINAL(3 (approx.)) keeps its
    inner pair; quotes are not special, so an apostrophe does not swallow the rest. An
    unclosed FINAL( takes the rest of the reply (a reply cut off by the token limit)."""
    prose = _ANY_FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    match = _FINAL.search(prose)
    if match is None:
        return None
    start = match.end()
    depth, end = 1, len(prose)
    for i in range(start, len(prose)):
        if prose[i] == "(":
            depth += 1
        elif prose[i] == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    inner = prose[start:end].strip()
    if match.group("var"):
        return Final("var", inner.strip("`'\" \t\n"))
    for q in _QUOTES:
        if len(inner) >= 2 * len(q) and inner.startswith(q) and inner.endswith(q):
            inner = inner[len(q):-len(q)].strip()
            break
    return Final("answer", inner)


def shown(output: str, limit: int) -> str:
    """REPL output as the root model sees it: the head, and how much was cut."""
    if len(output) <= limit:
        return output
    return output[:limit] + f"\n... [{len(output) - limit} more characters not shown]"
