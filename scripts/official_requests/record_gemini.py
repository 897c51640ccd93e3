"""Record the requests of the official gemini_agent.py (see common.py; a developer tool).

gemini_agent.py talks to Gemini's native API through google.generativeai (a ChatSession on a
GenerativeModel with the search tool). The harness points the SDK at the local server before the
agent is built, with the SDK's own documented options: `genai.configure(api_key=...,
transport="rest", client_options={"api_endpoint": <server>})` (the agent is built without an
api_key, as process_dataset.py builds it, so the script's own `genai.configure` is not called and
the configuration stands). The script is not changed.

The server answers as the native API does, so that the script takes the paths it would take
against Google: each request first goes through the strict simulator's rules
(tests/sim_gemini_native.py, SimGeminiNative.evaluate); a request the API refuses (a model turn
whose function calls go unanswered, which gemini_agent.py sends when the model calls the tool
again in reply to the pages) is answered with the API's 400 and consumes no reply. An accepted
request gets the next abstract reply (scenario.json) as a GenerateContentResponse (the
simulator's reply_payload: enums as numbers, as `$alt=json;enum-encoding=int` asks):
`text` and `answer` (its JSON: the script's answer channel is text) as text parts, then one
functionCall per `search` query. Each recorded request keeps the status it got.

The questions are the shared scenario's, then gemini_questions.json's (the script's own paths:
MALFORMED_FUNCTION_CALL, a short text, a reply to the pages without citations, a call on the
forced last turn, a call without "query").

Usage: /work/official-venv/bin/python scripts/official_requests/record_gemini.py --madqa MADQA
(the venv needs google-generativeai, pdf2image, whoosh==2.7.4 and the other official requirements).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the simulator (standard library only)
import common  # noqa: E402
from sim_gemini_native import SimGeminiNative, abstract_reply, reply_payload  # noqa: E402

KEY = "official-recording-key"
QUESTIONS = common.DATA / "gemini_questions.json"  # the script's own paths, over the shared documents
MODEL = "gemini-2.0-flash-exp"  # GeminiSearchAgent's default, and process_dataset.py's for --provider gemini


class GeminiRecorder:
    script = "gemini_agent.py"
    sdk = "google-generativeai"
    headers = ("content-type", "x-goog-api-key", "x-goog-request-params")

    def __init__(self) -> None:
        self.sim = SimGeminiNative(api_key=KEY)

    def make_agent(self, module: Any, engine: Any, base_url: str) -> Any:
        module.genai.configure(api_key=KEY, transport="rest", client_options={"api_endpoint": base_url})
        return module.GeminiSearchAgent(engine, model=MODEL)

    def reply(self, body: Any, abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
        raise AssertionError("replies go through answer(): the API's refusals come first")


@contextlib.contextmanager
def serve(provider: GeminiRecorder, script: common.Script) -> Iterator[str]:
    """common.serve, with the API's refusals: a refused request is recorded with its status and
    consumes no reply (the n-th accepted request gets the n-th reply). The status travels with the
    recorded request as the pseudo-header ":status" (no real header can be named so), moved to the
    request's "status" once the fixture is written."""

    class Handler(common.QuietHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's name)
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            keep: dict[str, Any] = {k: v for k, v in headers.items() if k in provider.headers}
            accepted = sum(r.headers.get(":status") == 200 for r in script.requests)
            script.requests.append(common.Recorded("POST", self.path, keep, json.loads(raw) if raw else None))
            verdict, ctx = provider.sim.evaluate(self.path, headers, raw)
            if verdict is not None:
                _rule, (keep[":status"], payload) = verdict
                self._send(keep[":status"], payload)
                return
            assert ctx is not None
            if accepted >= len(script.replies):
                script.problems.append(f"{script.question}: request {len(script.requests)} past the reply script's end")
                keep[":status"] = 400
                self._send(400, {"error": {"code": 400, "message": "the reply script has ended", "status": "INVALID_ARGUMENT"}})
                return
            keep[":status"] = 200
            self._send(200, reply_payload(ctx, abstract_reply(script.replies[accepted])))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with common.listening(Handler) as base_url:
        yield base_url


def main() -> None:
    provider = GeminiRecorder()
    common.serve = serve  # type: ignore[assignment]
    out, fixture = common.main_with_questions(provider, "gemini.json", QUESTIONS)
    fixture["source"]["recorded_with"] = "scripts/official_requests/record_gemini.py"
    fixture["source"]["harness"] = ("genai.configure(api_key=..., transport='rest', client_options={'api_endpoint': "
                                    "<local server>}) before GeminiSearchAgent(engine, model=...) is built; answers "
                                    "and refusals as tests/sim_gemini_native.py gives them")
    fixture["source"]["model"] = MODEL
    common.write_fixture(out, fixture, "refused as the API refuses them")


if __name__ == "__main__":
    main()
