"""Names deskbench gives things on disk and in its reports, from ids and file names it did not choose."""

from __future__ import annotations

import hashlib
import os
import re


def folder_name(text: str) -> str:
    """A folder name for an id: a readable slug plus a short hash of the exact id.

    Why the hash: the slug alone maps `fg/1` and `fg_1` to one folder, and the second episode then
    cleared the first's files, which were scored on the wrong file (issue 22)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60] or "_"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def readable_name(name: str) -> str:
    """A file name that is valid UTF-8 whatever bytes it was made of: a name read from disk holds
    its undecodable bytes as surrogates (os.fsdecode), which no JSON, SQLite text or model request
    can carry; each such byte reads `\\xff`. A valid name is returned unchanged."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
