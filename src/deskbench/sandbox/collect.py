"""The host's readers of a sandbox's pipes: capped stdout/stderr and the supervisor's stream of
files (written under the collection folder with the host's own caps, whatever the stream claims)."""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path, PurePosixPath
from typing import IO, Any

from deskbench.runs.names import readable_name
from deskbench.sandbox.limits import Limits
from deskbench.sandbox.result import OutputFile

DRAIN_BYTES = 16 * 1024**2   # read (and drop) this much past a stream's cap, then close the pipe


class Capped(threading.Thread):
    """Drain one pipe: keep the first `cap` bytes, count the rest, close after DRAIN_BYTES more
    (the writer then gets EPIPE instead of filling the wall time)."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        # a pipe of Popen is buffered: read1 returns what is there (read waits for all 64 KB)
        read = self.stream.read1 if isinstance(self.stream, io.BufferedIOBase) else self.stream.read
        try:
            while chunk := read(65536):
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.total += len(chunk)
                if self.total > self.cap + DRAIN_BYTES:
                    break
        except (OSError, ValueError):
            pass
        finally:
            self.stream.close()

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


def safe_name(name: str) -> str | None:
    p = PurePosixPath(name)
    if not name or "\0" in name or p.is_absolute() or any(part in ("..", ".", "") for part in name.split("/")):
        return None
    return str(p)


class Collector:
    """Reads the supervisor's stream: the status record, then files (written under `dest` with
    the host's own caps, whatever the stream claims)."""

    def __init__(self, dest: Path, limits: Limits) -> None:
        self.dest, self.limits = dest, limits
        self.dest_real = dest.resolve()
        self.status: dict[str, Any] | None = None
        self.files: list[OutputFile] = []
        self.skipped: list[tuple[str, str]] = []
        self.total = 0
        self.ended = False

    def read(self, stream: IO[bytes]) -> None:
        while True:
            line = stream.readline(65536)
            if not line:
                return
            try:
                rec = json.loads(line)
            except ValueError:
                return
            kind = rec.get("type")
            if kind == "status":
                self.status = rec
            elif kind == "skip":
                self.skipped.append((str(rec.get("name")), str(rec.get("reason"))))
            elif kind == "end":
                self.ended = True
                return
            elif kind == "file" and not self._file(stream, str(rec.get("name", "")),
                                                   int(rec.get("size", 0))):
                return

    def _file(self, stream: IO[bytes], name: str, size: int) -> bool:
        safe = safe_name(name)
        reason = None
        if safe is None:
            reason = "unsafe name"
        elif len(self.files) >= self.limits.result_files:
            reason = f"over the limit of {self.limits.result_files} files"
        elif self.total + size > self.limits.result_bytes:
            reason = f"over the {self.limits.result_bytes} bytes total limit"
        target = self.dest / safe if safe else None
        out = None
        if reason is None and target is not None:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                parent = target.parent.resolve()
                if parent != self.dest_real and self.dest_real not in parent.parents:
                    raise OSError("outside the collection directory")
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                out = os.fdopen(fd, "wb")
            except OSError as e:
                reason = f"cannot be written on the host ({e})"
        left = size
        while left > 0:
            chunk = stream.read(min(left, 1 << 20))
            if not chunk:
                if out:
                    out.close()
                return False
            if out:
                out.write(chunk)
            left -= len(chunk)
        if out is not None and target is not None and safe is not None:
            out.close()
            # the file keeps its bytes on disk; its name in records, JSON and prompts is valid UTF-8
            self.files.append(OutputFile(name=readable_name(safe), size=size, path=target))
            self.total += size
        else:
            self.skipped.append((readable_name(name), reason or "not collected"))
        return True
