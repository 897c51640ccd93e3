"""What the deliverable agent is given, shared by the built-in agent (agent.py) and its tools over
MCP (mcp_tools.py, which agent.py's `external` loads): the run's options for it and its input
files as prompt text. Kept apart so the MCP tools need not import the agent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deskbench.corpus.office import UnreadableFile, normalise
from deskbench.tracks.deliverables.prompts import (
    INLINE_HEADER,
    INPUTS_HEADER,
    OUTPUTS_HEADER,
    TRUNCATED,
)
from deskbench.tracks.deliverables.tasks import DeliverableTask
from deskbench.tracks.deliverables.web_access import WebChoice
from deskbench.tracks.deliverables.web_deny import DenyList


@dataclass(frozen=True)
class DeliverableOptions:
    """How `deliverable-agent` is set up for a run (`deskbench run` flags)."""

    inline_chars: int = 24_000
    trap_hints: bool = False  # --trap-hints
    web: WebChoice | None = None  # --web
    deny: DenyList | None = field(default_factory=DenyList.default)  # no peeking (web_deny.py); None: --allow-peeking
    agent_options: Mapping[str, object] = field(default_factory=dict)  # external: --command / --url / --timeout


def inline_inputs(paths: list[Path], budget: int) -> str:
    """The normalised text of the input files, at most `budget` characters shared fairly: each
    file gets an equal share, and what a short file leaves unused goes to the others."""
    if budget <= 0:
        return ""
    texts: list[tuple[str, str]] = []
    for path in paths:
        try:
            parts = normalise(path)
            body = "\n".join(f"# {p.name}\n{p.text}" if p.kind != "document" else p.text for p in parts)
        except UnreadableFile as exc:
            body = f"[could not be read here: {exc}]"
        texts.append((path.name, body))
    shown: dict[int, str] = {}
    remaining = budget
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i][1]))
    for rank, i in enumerate(by_length):
        share = remaining // (len(texts) - rank)
        body = texts[i][1]
        if len(body) > share:
            body = body[: max(0, share - len(TRUNCATED) - 1)] + "\n" + TRUNCATED
        remaining -= min(len(body), share)
        shown[i] = body
    out = [f"=== {name} ===\n{shown[i]}" for i, (name, _) in enumerate(texts)]
    return "\n\n".join(out)


def files_block(task: DeliverableTask, inputs: list[Path], inline_chars: int) -> str:
    """Where the input files are, the required outputs, and the inputs' text up to `inline_chars`
    (the external agent's question has none: its read_input tool gives them)."""
    lines = [INPUTS_HEADER, *(f"- /mnt/data/{p.name}" for p in inputs), ""]
    if task.required_outputs:
        lines += [OUTPUTS_HEADER]
        for o in task.required_outputs:
            sections = f" with sections/sheets/slides: {', '.join(o.sections)}" if o.sections else ""
            lines.append(f"- /mnt/result/{o.name} ({o.format}){sections}")
        lines.append("")
    inlined = inline_inputs(inputs, inline_chars)
    if inlined:
        lines += [INLINE_HEADER, inlined, ""]
    return "\n".join(lines)
