"""Record the HTTP requests the official MADQA BM25 agents send (a developer tool; tests do not run it).

The official scripts (github OxRML/MADQA baselines/bm25-mllm-agent/<provider>_agent.py) run
UNMODIFIED against a local server that records each request and answers from the scenario's
abstract reply script (tests/data/official_requests/scenario.json). Only what ties them to the
internet is replaced, and only from outside:

- `utils._get_doc_urls` (the Hugging Face `documents` table and its DownloadManager) returns the
  scenario's local PDF paths and a downloader that hands the path back; the PDFs are then
  rendered by the scripts' own `get_pdf_page_as_png` (pdf2image/poppler, 200 DPI);
- the Whoosh index is built by the scripts' own `WhooshSearchEngine` from the scenario's page
  text, written in the official Textract shape (file, service, page_number, total_pages, text);
- the SDK's base URL points at the local server (each provider module sets it: env or client).

The runner imports the official module from a MADQA checkout, builds its agent, and calls
`answer_question(question, max_iterations, top_k)` per scenario question, as process_dataset.py
does (an exception is recorded as the question's error, as process_dataset.py records it).
Each provider module (record_openai.py, ...) adds the reply format and how its agent is built.

Run it in a venv with the official requirements (baselines/bm25-mllm-agent/requirements.txt),
never the repo's: e.g. /work/official-venv/bin/python scripts/official_requests/record_openai.py
--madqa /path/to/MADQA. Standard library only here (plus Pillow for image sizes, which the
official requirements include), so the tests can import `normalise` and `differences`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "official_requests"
SCENARIO = DATA / "scenario.json"
AGENT_DIR = "baselines/bm25-mllm-agent"
IMAGE_NOTE = ("every image is replaced by {'image': {mime, width, height}}: the official scripts render with "
              "poppler (pdf2image), deskbench with pdfium; the pixels differ, the sizes at 200 DPI match")

# --- what is compared ------------------------------------------------------------------------

ID_KEYS = ("id", "tool_call_id", "tool_use_id")
MIME_KEYS = ("media_type", "mime_type", "mimeType")


def image_of(data: bytes, mime: str) -> dict[str, Any]:
    """An image as the fixtures keep it: its type and size, not its pixels."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return {"image": {"mime": mime, "width": im.width, "height": im.height}}


def _data_url(text: str) -> dict[str, Any] | None:
    if not text.startswith("data:image/") or ";base64," not in text:
        return None
    head, _, payload = text.partition(";base64,")
    try:
        return image_of(base64.b64decode(payload, validate=True), head[len("data:"):])
    except (binascii.Error, ValueError):
        return None


def as_data_urls(value: Any) -> Any:
    """A fixture body with its images put back as data: URLs of white PNGs of the recorded size
    (normalise's inverse for the OpenAI wire), so that a simulator can check an official request."""
    if isinstance(value, dict) and set(value) == {"image"}:
        from PIL import Image

        im = value["image"]
        buf = io.BytesIO()
        Image.new("RGB", (im["width"], im["height"]), "white").save(buf, format="PNG")
        return f"data:{im['mime']};base64,{base64.b64encode(buf.getvalue()).decode()}"
    if isinstance(value, dict):
        return {k: as_data_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_data_urls(v) for v in value]
    return value


def normalise(body: Any, ids: dict[str, str] | None = None) -> Any:
    """A request body as the fixtures keep it: every image (a data: URL, or base64 `data` beside
    a media_type/mime_type) as {"image": {mime, width, height}}; tool-call ids renamed by order
    of first appearance ("id1", "id2", ...) when `ids` is given (a map shared by one episode's
    requests): the ids are the server's, not the client's."""
    if isinstance(body, list):
        return [normalise(v, ids) for v in body]
    if not isinstance(body, dict):
        if isinstance(body, str):
            return _data_url(body) or body
        return body
    mime = next((body[k] for k in MIME_KEYS if isinstance(body.get(k), str)), None)
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key == "data" and isinstance(value, str) and isinstance(mime, str) and mime.startswith("image/"):
            out[key] = image_of(base64.b64decode(value), mime)
        elif key in ID_KEYS and isinstance(value, str) and ids is not None:
            out[key] = ids.setdefault(value, f"id{len(ids) + 1}")
        else:
            out[key] = normalise(value, ids)
    return out


def differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Every path where two JSON values differ ("" when equal): what a failing test reports."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in list(want) + [k for k in got if k not in want]:
            where = f"{path}.{key}"
            if key not in got:
                out.append(f"{where}: missing (want {json.dumps(want[key])[:80]})")
            elif key not in want:
                out.append(f"{where}: unexpected {json.dumps(got[key])[:80]}")
            else:
                out += differences(want[key], got[key], where)
        return out
    if isinstance(want, list) and isinstance(got, list):
        out = [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{path}[{i}]")]
        if len(want) != len(got):
            out.append(f"{path}: {len(want)} items wanted, {len(got)} sent")
        return out
    if want != got or type(want) is not type(got):
        return [f"{path}: want {json.dumps(want)[:80]}, got {json.dumps(got)[:80]}"]
    return []


def elements(value: Any) -> int:
    """How many leaf elements a JSON value has (what "N of M elements equal" counts)."""
    if isinstance(value, dict):
        return sum(elements(v) for v in value.values()) or 1
    if isinstance(value, list):
        return sum(elements(v) for v in value) or 1
    return 1


def equal_elements(want: Any, got: Any) -> int:
    """How many of `want`'s leaf elements `got` has equal, at the same path."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return 0
        return sum(equal_elements(v, got[k]) if k in got else 0 for k, v in want.items()) or int(want == got)
    if isinstance(want, list):
        if not isinstance(got, list):
            return 0
        return sum(equal_elements(a, b) for a, b in zip(want, got)) or int(want == got)
    return int(want == got and type(want) is type(got))


# --- the scripted server ---------------------------------------------------------------------

@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Provider(Protocol):
    """What one provider's recorder adds: its script, its SDK, its reply format."""

    script: str  # "openai_agent.py"
    sdk: str  # the distribution whose version is recorded: "openai"
    headers: tuple[str, ...]  # the request headers that are part of the protocol (lower case)

    def make_agent(self, module: Any, engine: Any, base_url: str) -> Any:
        """The official agent object, its SDK pointed at `base_url`."""

    def reply(self, body: Any, abstract: dict[str, Any], n: int, question: str) -> dict[str, Any]:
        """The provider's response JSON for the n-th (1-based) reply of a question's script."""


@dataclass
class Script:
    """The replies of the question in progress, and the requests it made."""

    question: str = ""
    replies: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class QuietHandler(BaseHTTPRequestHandler):
    """A local server's request handler that does not log each request."""

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def listening(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local server with `handler` on a free port while the block runs (its base URL is yielded)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serve(provider: Provider, script: Script) -> Iterator[str]:
    """A local server answering POSTs from `script` (its base URL is yielded). A request past
    the script's end is answered 400 (the SDKs do not retry it) and noted as a problem."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's name)
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.loads(raw) if raw else None
            keep = {k.lower(): v for k, v in self.headers.items() if k.lower() in provider.headers}
            script.requests.append(Recorded("POST", self.path, keep, body))
            n = len(script.requests)
            if n > len(script.replies):
                script.problems.append(f"{script.question}: request {n} past the reply script's end")
                self._send(400, {"error": {"message": "the reply script has ended", "type": "invalid_request_error"}})
                return
            try:
                self._send(200, provider.reply(body, script.replies[n - 1], n, script.question))
            except Exception as exc:  # the recorder's own bug: said, not hidden
                script.problems.append(f"{script.question}: reply {n} failed: {exc!r}")
                self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with listening(Handler) as base_url:
        yield base_url


# --- the official code, offline ---------------------------------------------------------------

class LocalDownloads:
    """Stands in for datasets.DownloadManager: the 'URL' is already the local path."""

    def download(self, url: str) -> str:
        return url


def load_official(madqa: Path, module: str, pdfs: dict[str, Path]) -> Any:
    """Import baselines/bm25-mllm-agent/<module>.py from a MADQA checkout with its `utils`
    reading local PDFs (nothing else of it is changed)."""
    agent_dir = madqa / AGENT_DIR
    if not (agent_dir / f"{module}.py").exists():
        raise SystemExit(f"{agent_dir / (module + '.py')} not found; give --madqa a checkout of github OxRML/MADQA")
    sys.path.insert(0, str(agent_dir))
    utils = importlib.import_module("utils")
    local = {name: str(path) for name, path in pdfs.items()}
    utils._get_doc_urls = lambda dataset_name="OxRML/MADQA": (local, LocalDownloads())
    return importlib.import_module(module), utils


def write_page_text(scenario: dict[str, Any], path: Path) -> None:
    """The scenario's page text as the official Textract script writes it, one page a line."""
    with path.open("w", encoding="utf-8") as f:
        for name, pages in scenario["documents"].items():
            for i, text in enumerate(pages, 1):
                f.write(json.dumps({"file": name, "service": "textract", "page_number": i,
                                    "total_pages": len(pages), "text": text}, ensure_ascii=False) + "\n")


def raised_at(exc: BaseException, agent_dir: Path) -> str:
    """The official code's line the exception left it from ("openai_agent.py:123 <code>")."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).parent == agent_dir]
    if not frames:
        return "outside the official code"
    f = frames[-1]
    return f"{Path(f.filename).name}:{f.lineno} {f.line}"


def commit_of(madqa: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(madqa), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def summary(result: Any) -> dict[str, Any]:
    """What answer_question returned, as process_dataset.py would write it (without trajectory)."""
    if not isinstance(result, dict):
        return {"returned": repr(result)}
    return {k: result.get(k) for k in ("answer", "citations", "iterations", "search_history")}


def record(provider: Provider, madqa: Path, out: Path, scenario_path: Path = SCENARIO,
           only: Callable[[dict[str, Any]], bool] = lambda q: True) -> dict[str, Any]:
    """Run the official agent over the scenario's questions; write and return the fixture."""
    scenario = json.loads(scenario_path.read_text(encoding="utf-8"))
    settings = scenario["settings"]
    pdfs = {name: scenario_path.parent / "pdfs" / name for name in scenario["documents"]}
    module_name = provider.script.removesuffix(".py")
    module, utils = load_official(madqa, module_name, pdfs)
    script = Script()
    questions = []
    with tempfile.TemporaryDirectory() as tmp:
        ocr = Path(tmp) / "ocr_output.jsonl"
        write_page_text(scenario, ocr)
        engine = utils.WhooshSearchEngine(str(ocr), index_dir=str(Path(tmp) / "whoosh_index"))
        with serve(provider, script) as base_url:
            agent = provider.make_agent(module, engine, base_url)
            for q in filter(only, scenario["questions"]):
                script.question, script.replies, script.requests = q["id"], q["replies"], []
                entry: dict[str, Any] = {"id": q["id"]}
                try:  # as process_dataset.py's process_question: an exception is the question's error
                    entry["result"] = summary(agent.answer_question(q["question"], max_iterations=settings["max_iterations"],
                                                                    top_k=settings["top_k"]))
                except Exception as exc:
                    entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                    entry["error_at"] = raised_at(exc, madqa / AGENT_DIR)
                ids: dict[str, str] = {}
                entry["requests"] = [{"method": r.method, "path": r.path, "headers": r.headers,
                                      "body": normalise(r.body, ids)} for r in script.requests]
                questions.append(entry)
    if script.problems:
        raise SystemExit("the recording went wrong: " + "; ".join(script.problems))
    fixture = {
        "source": {"repo": "OxRML/MADQA", "commit": commit_of(madqa), "file": f"{AGENT_DIR}/{provider.script}",
                   "sdk": f"{provider.sdk}=={importlib.metadata.version(provider.sdk)}",
                   "recorded_with": f"scripts/official_requests/record_{provider.sdk}.py",
                   "python": sys.version.split()[0], "images": IMAGE_NOTE},
        "settings": {"max_iterations": settings["max_iterations"], "top_k": settings["top_k"]},
        "questions": questions,
    }
    out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return fixture


def main(provider: Provider, default_out: str) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=f"Record the requests of the official {provider.script}")
    parser.add_argument("--madqa", type=Path, default=Path(os.environ.get("MADQA_REPO", "MADQA")),
                        help="a checkout of github OxRML/MADQA (default $MADQA_REPO or ./MADQA)")
    parser.add_argument("--out", type=Path, default=DATA / default_out)
    args = parser.parse_args()
    fixture = record(provider, args.madqa.resolve(), args.out)
    n = sum(len(q["requests"]) for q in fixture["questions"])
    print(f"{args.out}: {n} requests over {len(fixture['questions'])} questions "
          f"({fixture['source']['sdk']}, MADQA {fixture['source']['commit'][:7]})")


def main_with_questions(provider: Provider, default_out: str, questions: Path) -> tuple[Path, dict[str, Any]]:
    """The recording of a script with its own questions (record_vllm.py, record_gemini.py): the
    shared scenario, then `questions` over the shared documents and settings. Each request's
    status, carried by the provider's serve as the pseudo-header ":status", becomes the request's
    "status". Returns where to write the fixture (--out) and the fixture, for the caller to
    complete its source and write with write_fixture."""
    import argparse

    parser = argparse.ArgumentParser(description=f"Record the requests of the official {provider.script}")
    parser.add_argument("--madqa", type=Path, required=True, help="a checkout of github OxRML/MADQA")
    parser.add_argument("--out", type=Path, default=DATA / default_out)
    args = parser.parse_args()
    fixture = record(provider, args.madqa.resolve(), args.out)
    with tempfile.TemporaryDirectory() as tmp:
        scenario = json.loads(SCENARIO.read_text(encoding="utf-8"))
        scenario["questions"] = json.loads(questions.read_text(encoding="utf-8"))["questions"]
        (Path(tmp) / "scenario.json").write_text(json.dumps(scenario), encoding="utf-8")
        (Path(tmp) / "pdfs").symlink_to(DATA / "pdfs")
        extra = record(provider, args.madqa.resolve(), Path(tmp) / default_out, Path(tmp) / "scenario.json")
    fixture["questions"] += extra["questions"]
    fixture["source"]["questions"] = f"tests/data/official_requests/scenario.json, then {questions.name}"
    for question in fixture["questions"]:
        for request in question["requests"]:
            request["status"] = request["headers"].pop(":status")
    return args.out, fixture


def write_fixture(out: Path, fixture: dict[str, Any], refused: str) -> None:
    """Write a fixture of main_with_questions and say what it holds; `refused` says how the
    requests that got an error status were answered."""
    out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n = sum(len(q["requests"]) for q in fixture["questions"])
    errors = sum(r["status"] != 200 for q in fixture["questions"] for r in q["requests"])
    print(f"{out}: {n} requests ({errors} {refused}) over {len(fixture['questions'])} questions "
          f"({fixture['source']['sdk']}, MADQA {fixture['source']['commit'][:7]})")
