"""Record the requests of the official vllm_agent.py (see common.py; a developer tool).

vllm_agent.py drives an OpenAI-compatible vLLM server through the openai SDK
(`openai.OpenAI(base_url=..., api_key=...)`); the agent is built as process_dataset.py builds it for
--provider vllm (model "default"), with base_url the local server's /v1 (the constructor's own
argument; VLLM_BASE_URL would do the same). The script is not changed.

The server answers as vLLM does, so that the script takes the paths it would take against a real
server: each request first goes through the strict simulator's vLLM rules (tests/sim_openai.py,
profile "vllm", auto tool choice on, as vllm_agent.py needs: its tool_choice "auto" is refused
without --enable-auto-tool-choice; only vLLM's own rules, schema_strict off: vLLM does not check the
OpenAI message order, and the script sends a tool result, then the pages as a user message, then the
next tool result). A request the rules refuse is answered with vLLM's 400 and consumes no reply; an
accepted one gets the next abstract reply as tests/vllm_replies.py builds it (also what the test
answers with): a chat.completion, or a scripted refusal (`status`). Each recorded request keeps the
status it got.

The questions are the shared scenario's, then vllm_questions.json's (the script's own paths:
provide_answer arguments that are not JSON, searches without a query, an unknown tool, answers in
the text, the forced last iteration still searching, the forced request refused).

Usage: /work/official-venv/bin/python scripts/official_requests/record_vllm.py --madqa MADQA
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the simulator and the replies
import common  # noqa: E402
from sim_openai import SimOpenAI  # noqa: E402
from vllm_replies import MODEL, vllm_behaviour  # noqa: E402

KEY = "abc123"  # VLLMSearchAgent's default (VLLM_API_KEY unset); the simulated server takes any
QUESTIONS = common.DATA / "vllm_questions.json"
CONTEXT = 10**9
"""The simulated --max-model-len: the simulator counts a request's characters / 4, page images'
base64 included (a vision model counts an image as a few thousand tokens), so it is set past any
request of the scenario; the context limit is not what these recordings are about."""


class VllmRecorder:
    script = "vllm_agent.py"
    sdk = "openai"
    headers = ("content-type",)

    def __init__(self) -> None:
        self.sim = SimOpenAI(profile="vllm", schema_strict=False, auto_tool_choice=True, models={MODEL}, api_key=None,
                             context_length=CONTEXT)

    def make_agent(self, module: Any, engine: Any, base_url: str) -> Any:
        return module.VLLMSearchAgent(engine, model=MODEL, base_url=f"{base_url}/v1", api_key=KEY)

    def reply(self, body: Any, abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
        raise AssertionError("replies go through the simulator: its refusals come first")


@contextlib.contextmanager
def serve(provider: VllmRecorder, script: common.Script) -> Iterator[str]:
    """common.serve, through the simulator: a refused request is recorded with its status and
    consumes no reply (the n-th accepted request of a question gets its n-th reply). The status
    travels with the recorded request as the pseudo-header ":status", moved to the request's
    "status" once the fixture is written."""
    sim = provider.sim
    accepted_before = {"question": None, "count": 0}

    def answer(body: dict[str, Any], n: int) -> dict[str, Any]:
        k = n - accepted_before["count"]  # 1-based within the question
        if k > len(script.replies):
            script.problems.append(f"{script.question}: request {len(script.requests)} past the reply script's end")
            return {"kind": "status", "status": 400, "message": "the reply script has ended"}
        return vllm_behaviour(script.replies[k - 1], script.question, k)

    sim.script = answer

    class Handler(common.QuietHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's name)
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            if accepted_before["question"] != script.question or not script.requests:
                accepted_before["question"], accepted_before["count"] = script.question, len(sim.accepted)
            keep: dict[str, Any] = {k: v for k, v in headers.items() if k in provider.headers}
            script.requests.append(common.Recorded("POST", self.path, keep, json.loads(raw) if raw else None))
            status, reply_headers, payload = sim._handle(self.path, headers, raw)
            keep[":status"] = status
            self.send_response(status)
            for name, value in reply_headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    with common.listening(Handler) as base_url:
        yield base_url


def main() -> None:
    provider = VllmRecorder()
    common.serve = serve  # type: ignore[assignment]
    out, fixture = common.main_with_questions(provider, "vllm.json", QUESTIONS)
    fixture["source"]["recorded_with"] = "scripts/official_requests/record_vllm.py"
    fixture["source"]["harness"] = ("VLLMSearchAgent(engine, model='default', base_url=<local server>/v1, "
                                    "api_key='abc123'), as process_dataset.py builds it for --provider vllm; answers "
                                    "from tests/vllm_replies.py through tests/sim_openai.py's vLLM rules "
                                    "(auto tool choice on, schema_strict off)")
    fixture["settings"]["model"] = MODEL
    common.write_fixture(out, fixture, "answered with an error")


if __name__ == "__main__":
    main()
