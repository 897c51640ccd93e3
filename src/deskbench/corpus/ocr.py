"""OCR engines behind one protocol, chosen from a registry.

tesseract is the default (Debian `tesseract-ocr`, run with OMP_THREAD_LIMIT=1: its OpenMP
threading is ten times slower on two cores). rapidocr-onnxruntime, whose models ship inside
the wheel, is the fallback when tesseract is absent; nothing here downloads anything.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Protocol

from PIL import Image

OCR_DPI = 300


class OcrEngine(Protocol):
    """Turns a rendered page image into text."""

    name: str

    def recognize(self, image: Image.Image) -> str: ...


class OcrUnavailable(RuntimeError):
    """No OCR engine can run on this machine; the message says what to install."""


class TesseractOcr:
    name = "tesseract"

    def __init__(self, lang: str = "eng", timeout_s: float = 120.0) -> None:
        exe = shutil.which("tesseract")
        if exe is None:
            raise OcrUnavailable("tesseract not found; install it with: apt-get install tesseract-ocr")
        self.exe = exe
        self.lang = lang
        self.timeout_s = timeout_s

    def recognize(self, image: Image.Image) -> str:
        buf = io.BytesIO()
        image.convert("L").save(buf, format="PNG", compress_level=1)
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        proc = subprocess.run(
            [self.exe, "stdin", "stdout", "-l", self.lang, "--psm", "3", "--dpi", str(OCR_DPI)],
            input=buf.getvalue(),
            capture_output=True,
            env=env,
            timeout=self.timeout_s,
            check=False,
        )
        if proc.returncode != 0:
            msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise RuntimeError(f"tesseract failed: {msg[-1] if msg else proc.returncode}")
        return proc.stdout.decode("utf-8", "replace")


class RapidOcr:
    name = "rapidocr"

    def __init__(self, lang: str = "eng") -> None:
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:
            raise OcrUnavailable(
                "rapidocr not installed; install it with: pip install 'deskbench[rapidocr]'"
            ) from exc
        self._engine = RapidOCR()

    def recognize(self, image: Image.Image) -> str:
        import numpy as np

        result, _ = self._engine(np.asarray(image.convert("RGB")))
        if not result:
            return ""
        # Each item: [box, text, confidence]; keep reading order by the box's top-left corner.
        lines = sorted(result, key=lambda r: (round(r[0][0][1] / 10), r[0][0][0]))
        return "\n".join(str(r[1]) for r in lines)


OCR_ENGINES: dict[str, Callable[[str], OcrEngine]] = {
    "tesseract": TesseractOcr,
    "rapidocr": RapidOcr,
}


def make_engine(name: str = "auto", lang: str = "eng") -> OcrEngine:
    """The named engine, or with "auto" the first one that can run here."""
    if name != "auto":
        if name not in OCR_ENGINES:
            raise OcrUnavailable(f"unknown OCR engine {name!r}; choose one of {sorted(OCR_ENGINES)}")
        return OCR_ENGINES[name](lang)
    reasons = []
    for factory in OCR_ENGINES.values():
        try:
            return factory(lang)
        except OcrUnavailable as exc:
            reasons.append(str(exc))
    raise OcrUnavailable("no OCR engine available: " + "; ".join(reasons))
