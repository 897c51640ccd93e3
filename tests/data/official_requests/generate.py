"""Write the scenario's PDFs and its page text in the official Textract shape (run from the repo:
`.venv/bin/python tests/data/official_requests/generate.py`). The PDFs are stored: the official
scripts render them with poppler when the requests are recorded, deskbench with pdfium in the
tests; the same bytes go to both. write_pdf gives the same bytes for the same pages."""

from __future__ import annotations

import json
from pathlib import Path

from deskbench.generate.pdfs import PageSpec, write_pdf

HERE = Path(__file__).parent


def main() -> None:
    scenario = json.loads((HERE / "scenario.json").read_text(encoding="utf-8"))
    lines = []
    for name, pages in scenario["documents"].items():
        write_pdf(HERE / "pdfs" / name, [PageSpec(title=Path(name).stem.title(), paragraphs=[t]) for t in pages])
        lines += [json.dumps({"file": name, "service": "textract", "page_number": i, "total_pages": len(pages),
                              "text": text}, ensure_ascii=False)  # textract.py's key order
                  for i, text in enumerate(pages, 1)]
    (HERE / "page_text.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
