"""`--model local`'s llama.cpp server gets the threads it is given (models/local_llama.py): it
runs them on OpenMP, which OMP_THREAD_LIMIT caps, and scripts/demo.sh and scripts/test.sh export
OMP_THREAD_LIMIT=1 for tesseract; inherited as is, the demo's model would run on one core
whatever --n_threads says."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import require_local_model


def test_the_server_may_use_its_threads_under_a_shell_limit_of_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    require_local_model()
    from tiny_gguf import write_tiny_gguf

    from deskbench.models.local_llama import LlamaServer, gguf_path

    monkeypatch.setenv("OMP_THREAD_LIMIT", "1")  # as scripts/demo.sh exports it
    server = LlamaServer(write_tiny_gguf(gguf_path(), tmp_path / "tiny.gguf"), threads=2)
    server.start()
    try:
        assert server.proc is not None
        environ = Path(f"/proc/{server.proc.pid}/environ").read_bytes().split(b"\0")
    finally:
        server.stop()
    assert b"OMP_THREAD_LIMIT=2" in environ and b"OMP_THREAD_LIMIT=1" not in environ
