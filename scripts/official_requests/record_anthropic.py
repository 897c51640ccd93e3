"""Record the requests of the official anthropic_agent.py (see common.py; a developer tool).

Replies are Message objects shaped as the Messages API returns them (id, type, role, model,
content, stop_reason, stop_sequence, usage), so the SDK parses them as it parses real ones and
the script rebuilds its assistant turn from real content blocks. Abstract reply to content
blocks, in this order: `text` -> a text block; `search` -> one search_documents tool_use per
query; `answer` -> a provide_answer tool_use with it as input; `tools` (anthropic_questions.json
only) -> other tool_use blocks. tool_use ids are toolu_<question>_<n>_<i>. stop_reason:
`stop_reason` when given, else tool_use when a tool is called, else end_turn.

The shared scenario's questions are recorded first, then the Anthropic-only ones
(tests/data/official_requests/anthropic_questions.json: an unknown tool, stop reasons other
than tool_use, a search call without a query).

Usage: /work/official-venv/bin/python scripts/official_requests/record_anthropic.py --madqa MADQA
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import common  # noqa: E402

EXTRA = common.DATA / "anthropic_questions.json"


def content_blocks(abstract: dict[str, Any], question: str, n: int) -> list[dict[str, Any]]:
    """The reply's content blocks, in the order the module docstring gives."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": abstract["text"]}] if "text" in abstract else []
    calls = [("search_documents", {"query": q}) for q in abstract.get("search", [])]
    if "answer" in abstract:
        calls.append(("provide_answer", abstract["answer"]))
    calls += [(t["name"], t["input"]) for t in abstract.get("tools", [])]
    blocks += [{"type": "tool_use", "id": f"toolu_{question}_{n}_{i}", "name": name, "input": args}
               for i, (name, args) in enumerate(calls)]
    return blocks


def message(body: dict[str, Any], abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
    """The Message for one abstract reply."""
    blocks = content_blocks(abstract, question, n)
    stop = abstract.get("stop_reason") or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    return {
        "id": f"msg_{question}_{n}", "type": "message", "role": "assistant", "model": body["model"],
        "content": blocks, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "service_tier": "standard"},
    }


class AnthropicRecorder:
    script = "anthropic_agent.py"
    sdk = "anthropic"
    headers = ("anthropic-version", "content-type")

    def make_agent(self, module: Any, engine: Any, base_url: str) -> Any:
        os.environ["ANTHROPIC_BASE_URL"] = base_url  # the SDK reads both; the script passes neither
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-official-recording"
        return module.AnthropicSearchAgent(engine)  # its default model, claude-sonnet-4-5-20250929

    def reply(self, body: Any, abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
        return message(body, abstract, n, question)


def main() -> None:
    """common.main's command line, over the scenario with the Anthropic-only questions appended
    (a scenario file written beside a link to the scenario's PDFs, as common.record reads them)."""
    import argparse

    parser = argparse.ArgumentParser(description="Record the requests of the official anthropic_agent.py")
    parser.add_argument("--madqa", type=Path, default=Path(os.environ.get("MADQA_REPO", "MADQA")),
                        help="a checkout of github OxRML/MADQA (default $MADQA_REPO or ./MADQA)")
    parser.add_argument("--out", type=Path, default=common.DATA / "anthropic.json")
    args = parser.parse_args()
    scenario = json.loads(common.SCENARIO.read_text(encoding="utf-8"))
    extra = json.loads(EXTRA.read_text(encoding="utf-8"))["questions"]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pdfs").symlink_to(common.DATA / "pdfs")
        merged = Path(tmp) / "scenario.json"
        merged.write_text(json.dumps({**scenario, "questions": scenario["questions"] + extra}), encoding="utf-8")
        fixture = common.record(AnthropicRecorder(), args.madqa.resolve(), args.out, scenario_path=merged)
    n = sum(len(q["requests"]) for q in fixture["questions"])
    print(f"{args.out}: {n} requests over {len(fixture['questions'])} questions "
          f"({fixture['source']['sdk']}, MADQA {fixture['source']['commit'][:7]})")


if __name__ == "__main__":
    main()
