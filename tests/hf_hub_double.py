"""A strict local double of the Hugging Face hub for one dataset repository, as huggingface_hub
(2.x) calls it: repo info (`/api/datasets/REPO[/revision/REV]`), the file tree
(`/api/datasets/REPO/tree/REV`), and the files (HEAD and GET on `/datasets/REPO/resolve/REV/NAME`).

It refuses what the hub refuses, with the hub's error headers (`X-Error-Code`, `X-Error-Message`)
and JSON body: an unknown revision (RevisionNotFound), a file the repository does not hold
(EntryNotFound), any other path (RepoNotFound), a token it does not know (401 "Invalid
credentials in Authorization header"); a gated repository's files without a token (401
GatedRepo) or with a token not granted access (403 GatedRepo), the dataset card being public as on
the hub. `hold` names a file whose GET, once its headers and the first half of its body are sent,
waits for `release` (`reached` is set then): a test kills the client there, as a user's Ctrl-C
or a lost connection would. Every request is logged as (method, path, Authorization, status).

Sources of the refusals: the texts as the hub sends them, quoted in huggingface_hub's issues
(ToTheBeginning/PuLID#97 for the gated 401, huggingface/dataset-viewer#2083 for the gated 403).
hub_env() is the environment that points the huggingface_hub client at a double.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

from http_double import HandlerDouble, QuietHandler

SHA = "9d2e5c1b7a3f4e6d8c0b1a2f3e4d5c6b7a8f9e0d"
GRANTED, PENDING = "hf_granted_token", "hf_pending_token"


class FakeHub(HandlerDouble):
    """The hub's API for the dataset `repo` whose files are those under `root`."""

    def __init__(self, root: Path, repo: str, *, gated: bool = False) -> None:
        self.root = root
        self.repo = repo
        self.gated = gated
        self.hold: str | None = None
        self.reached = threading.Event()
        self.log: list[tuple[str, str, str | None, int]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer._serve(self, body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                outer._serve(self, body=False)

            def do_POST(self) -> None:  # noqa: N802
                outer._error(self, 405, "", "Method not allowed", body=True)

        super().__init__(Handler)

    def file_gets(self) -> list[str]:
        """The repository files fetched with GET and answered 200, in order."""
        prefix = f"/datasets/{self.repo}/resolve/"
        return [unquote(p[len(prefix):]).partition("/")[2] for m, p, _, s in self.log
                if m == "GET" and p.startswith(prefix) and s == 200]

    def _files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*") if p.is_file())

    def _reply(self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str], send: bool) -> None:
        with self.lock:
            self.log.append((h.command, h.path, h.headers.get("Authorization"), status))
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if send:
            h.wfile.write(body)

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str, message: str, body: bool) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._reply(h, status, json.dumps({"error": message}).encode(), headers, body)

    def _gate(self, h: BaseHTTPRequestHandler, body: bool) -> bool:
        if not self.gated:
            return True
        auth = h.headers.get("Authorization")
        if auth is None:
            self._error(h, 401, "GatedRepo", f"Access to dataset {self.repo} is restricted. You must have access to "
                        "it and be authenticated to access it. Please log in.", body)
            return False
        if auth == f"Bearer {PENDING}":
            self._error(h, 403, "GatedRepo", f"Access to dataset {self.repo} is restricted and you are not in the "
                        f"authorized list. Visit https://huggingface.co/datasets/{self.repo} to ask for access.", body)
            return False
        return True

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        auth = h.headers.get("Authorization")
        if auth is not None and not auth.startswith("Bearer "):
            return self._error(h, 400, "", "Malformed Authorization header", body)
        if auth is not None and auth not in (f"Bearer {GRANTED}", f"Bearer {PENDING}"):
            return self._error(h, 401, "", "Invalid credentials in Authorization header", body)
        info = f"/api/datasets/{self.repo}"
        if h.command == "GET" and path in (info, f"{info}/revision/main", f"{info}/revision/{SHA}"):
            siblings = [{"rfilename": p.relative_to(self.root).as_posix()} for p in self._files()]
            return self._reply(h, 200, json.dumps({"_id": "x", "id": self.repo, "author": self.repo.split("/")[0],
                                                   "sha": SHA, "private": False,
                                                   "gated": "auto" if self.gated else False, "disabled": False,
                                                   "siblings": siblings}).encode(),
                               {"Content-Type": "application/json"}, body)
        if h.command == "GET" and path.startswith(f"{info}/tree/"):
            revision = path[len(f"{info}/tree/"):].partition("/")[0]
            if revision not in (SHA, "main"):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
            if not self._gate(h, body):
                return None
            tree = [{"type": "file", "oid": hashlib.sha1(p.read_bytes()).hexdigest(), "size": p.stat().st_size,
                     "path": p.relative_to(self.root).as_posix()} for p in self._files()]
            return self._reply(h, 200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, body)
        resolve = f"/datasets/{self.repo}/resolve/"
        if path.startswith(resolve):
            revision, _, name = path[len(resolve):].partition("/")
            if revision not in (SHA, "main"):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {revision}", body)
            if name != "README.md" and not self._gate(h, body):  # the dataset card is public, as on the hub
                return None
            file = self.root / name
            if not file.is_file() or ".." in name.split("/"):
                return self._error(h, 404, "EntryNotFound", f"{name} does not exist on \"{revision}\"", body)
            data = file.read_bytes()
            if body and name == self.hold:
                return self._held(h, data)
            return self._reply(h, 200, data, {"Content-Type": "application/octet-stream", "X-Repo-Commit": SHA,
                                              "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                                              "Accept-Ranges": "bytes"}, body)
        return self._error(h, 404, "RepoNotFound", "Repository not found", body)

    def _held(self, h: BaseHTTPRequestHandler, data: bytes) -> None:
        with self.lock:
            self.log.append((h.command, h.path, h.headers.get("Authorization"), 0))  # 0: never finished
        h.send_response(200)
        for k, v in {"Content-Type": "application/octet-stream", "X-Repo-Commit": SHA,
                     "ETag": f'"{hashlib.sha1(data).hexdigest()}"', "Content-Length": str(len(data))}.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data[:len(data) // 2])
        h.wfile.flush()
        self.reached.set()
        self.release.wait(120)
        h.close_connection = True


def hub_env(tmp_path: Path, hub: FakeHub, token: str | None) -> dict[str, str]:
    """This process's environment with the client pointed at `hub` (HF_ENDPOINT), a fresh HF_HOME
    under tmp_path, and HF_TOKEN set to `token` (none of the user's tokens or offline switch)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_TOKEN_PATH")}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1")
    if token is not None:
        env["HF_TOKEN"] = token
    return env
