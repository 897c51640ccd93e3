"""`deskbench ingest --page-text`: supplied page text (the official MADQA OCR) in place of ours,
in the page store, the search index and every text view agents read (issue 18 row 14)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import cli_json, ingest, run_cli, write_text_pdf

from deskbench.agents.base import AgentContext, AgentSettings, load_page_parts
from deskbench.corpus import Corpus
from deskbench.tracks.docqa.agents.rlm_context import write_context


def _corpus(root: Path) -> Path:
    write_text_pdf(root / "pdfs" / "alpha.pdf", ["harbour fees for the winter", "the annual budget table",
                                                  "signatures and stamps"])
    write_text_pdf(root / "pdfs" / "beta.pdf", ["a permit for the bakery", "inspection notes"])
    _, summary = ingest(root / "corpus", [root / "pdfs"])
    assert summary.files_ok == 2
    return root / "corpus"


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _search(corpus: Path, query: str) -> list[tuple[str, int]]:
    hits = cli_json("search", query, "--corpus", str(corpus), "--json")
    assert isinstance(hits, list)
    return [(h["document"], h["page"]) for h in hits]


def test_supplied_text_is_searched_and_served_in_place_of_ours(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    text = _jsonl(tmp_path / "ocr.jsonl", [{"document": "alpha.pdf", "page": 2, "text": "Quetzalcoatl budget 1999"}])
    data = cli_json("ingest", "--corpus", str(corpus), "--page-text", str(text), "--json", "--quiet")
    assert isinstance(data, dict)
    pt = data["page_text"]
    assert (pt["pages"], pt["changed"], pt["unchanged"], pt["documents_reindexed"]) == (1, 1, 0, 1)
    assert (pt["corpus_pages_supplied"], pt["corpus_pages_own"]) == (1, 4)
    # the search index has the supplied text, not ours
    assert _search(corpus, "quetzalcoatl") == [("alpha.pdf", 2)]
    assert _search(corpus, "annual") == []
    assert _search(corpus, "harbour") == [("alpha.pdf", 1)]  # pages not in the file keep our text
    # every text view reads it: page_text, page_texts (bm25-agent/rag/oracle --view text), rlm's context
    c = Corpus.open(corpus)
    record = c.page_text("alpha.pdf", 2)
    assert record.text == "Quetzalcoatl budget 1999"
    assert record.text_source == "page-text:" + pt["sha256"]
    assert c.page_text("alpha.pdf", 1).text_source == "text_layer"
    assert c.page_texts([("alpha.pdf", 2), ("beta.pdf", 1)])[0] == "Quetzalcoatl budget 1999"
    assert c.search("quetzalcoatl")[0].snippet == "**Quetzalcoatl** budget 1999"
    ctx = AgentContext(model=None, corpus=c, settings=AgentSettings(view="text"))  # type: ignore[arg-type]
    parts = load_page_parts(ctx, [("alpha.pdf", 2)])
    assert parts[1].text == "Quetzalcoatl budget 1999"  # type: ignore[union-attr]
    write_context(c, tmp_path / "context.txt")
    assert "[PAGE 2]\nQuetzalcoatl budget 1999\n[END PAGE 2]" in (tmp_path / "context.txt").read_text()
    # our own text stays in the store for audit
    db = sqlite3.connect(corpus / "pages.sqlite")
    assert "annual budget" in db.execute("SELECT text FROM pages WHERE doc_id = 'alpha.pdf' AND page = 2").fetchone()[0]
    # info says where the text came from
    info = cli_json("info", "--corpus", str(corpus), "--json")
    assert isinstance(info, dict)
    assert info["pages_page_text"] == 1
    assert info["page_text_files"][0]["sha256"] == pt["sha256"] and info["page_text_files"][0]["pages"] == 1
    assert {d["document"]: d["pages_page_text"] for d in info["document_list"]} == {"alpha.pdf": 1, "beta.pdf": 0}
    plain = run_cli("info", "--corpus", str(corpus))
    assert "1 pages read from supplied text (--page-text), 4 keep deskbench's own text" in plain.stdout


def test_same_file_again_changes_nothing(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    text = _jsonl(tmp_path / "ocr.jsonl", [{"document": "beta.pdf", "page": 1, "text": "zymurgy licence"}])
    first = cli_json("ingest", "--corpus", str(corpus), "--page-text", str(text), "--json", "--quiet")
    again = cli_json("ingest", str(tmp_path / "pdfs"), "--corpus", str(corpus), "--page-text", str(text),
                     "--json", "--quiet")
    assert isinstance(first, dict) and isinstance(again, dict)
    assert again["files_unchanged"] == 2 and again["pages"] == 0
    assert (again["page_text"]["changed"], again["page_text"]["unchanged"], again["page_text"]["documents_reindexed"]) == (0, 1, 0)
    c = Corpus.open(corpus)
    assert c.index.num_pages() == 5
    assert _search(corpus, "zymurgy") == [("beta.pdf", 1)]
    plain = run_cli("ingest", "--corpus", str(corpus), "--page-text", str(text), "--quiet")
    assert plain.returncode == 0, plain.stderr
    assert "1 pages (0 changed, 1 unchanged; 0 documents re-indexed)" in plain.stdout
    assert "4 that keep deskbench's own text" in plain.stdout


def test_official_shapes_textract_and_mistral_markdown(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    text = _jsonl(tmp_path / "official.jsonl", [
        # baselines/utils/ocr-documents/textract.py, one page a line
        {"file": "alpha.pdf", "service": "textract", "page_number": 3, "total_pages": 3, "text": "Textract saw xylophone"},
        # the RLM's Mistral OCR corpus, one document a line, pages split on "\n---\n"
        {"pdf_name": "beta.pdf", "markdown": "# Permit\nmarkdown page one\n---\n| inspection | wombat |",
         "metadata": json.dumps({"num_pages": 2})},
    ])
    data = cli_json("ingest", "--corpus", str(corpus), "--page-text", str(text), "--json", "--quiet")
    assert isinstance(data, dict) and data["page_text"]["pages"] == 3
    assert _search(corpus, "xylophone") == [("alpha.pdf", 3)]
    assert _search(corpus, "wombat") == [("beta.pdf", 2)]
    c = Corpus.open(corpus)
    assert c.page_text("beta.pdf", 1).text == "# Permit\nmarkdown page one"
    assert c.page_text("beta.pdf", 2).text == "| inspection | wombat |"
    # one document a line with a list of pages
    listed = _jsonl(tmp_path / "listed.jsonl", [{"document": "alpha.pdf", "pages": ["one aardvark", "two", "three"]}])
    cli_json("ingest", "--corpus", str(corpus), "--page-text", str(listed), "--json", "--quiet")
    assert _search(corpus, "aardvark") == [("alpha.pdf", 1)]
    assert _search(corpus, "xylophone") == []  # the later file's text for that page
    info = cli_json("info", "--corpus", str(corpus), "--json")
    assert isinstance(info, dict) and info["pages_page_text"] == 5
    assert sorted(f["pages"] for f in info["page_text_files"]) == [2, 3]


def test_pdfs_and_page_text_in_one_command(tmp_path: Path) -> None:
    write_text_pdf(tmp_path / "pdfs" / "gamma.pdf", ["scanned page our OCR misread", "second"])
    text = _jsonl(tmp_path / "t.jsonl", [{"document": "gamma.pdf", "page": 1, "text": "the official okapi text"}])
    data = cli_json("ingest", str(tmp_path / "pdfs"), "--corpus", str(tmp_path / "c"), "--page-text", str(text),
                    "--json", "--quiet")
    assert isinstance(data, dict) and data["files_new"] == 1 and data["page_text"]["corpus_pages_own"] == 1
    assert _search(tmp_path / "c", "okapi") == [("gamma.pdf", 1)]
    assert _search(tmp_path / "c", "misread") == []


def test_a_changed_pdf_drops_the_text_supplied_for_its_old_version(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    text = _jsonl(tmp_path / "t.jsonl", [{"document": "beta.pdf", "page": 2, "text": "narwhal"}])
    cli_json("ingest", "--corpus", str(corpus), "--page-text", str(text), "--json", "--quiet")
    write_text_pdf(tmp_path / "pdfs" / "beta.pdf", ["a new permit", "new inspection notes"])
    cli_json("ingest", str(tmp_path / "pdfs"), "--corpus", str(corpus), "--json", "--quiet")
    assert _search(corpus, "narwhal") == []
    c = Corpus.open(corpus)
    assert c.page_text("beta.pdf", 2).text_source == "text_layer"
    assert c.store.supplied_counts() == {}


def test_a_corpus_made_before_supplied_text_gets_it(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    db = sqlite3.connect(corpus / "pages.sqlite")
    db.executescript("DROP TABLE page_text; DROP TABLE page_text_files;")
    db.close()
    info = cli_json("info", "--corpus", str(corpus), "--json")
    assert isinstance(info, dict) and info["pages_page_text"] == 0
    text = _jsonl(tmp_path / "t.jsonl", [{"document": "alpha.pdf", "page": 1, "text": "pangolin"}])
    cli_json("ingest", "--corpus", str(corpus), "--page-text", str(text), "--json", "--quiet")
    assert _search(corpus, "pangolin") == [("alpha.pdf", 1)]


def _fails(tmp_path: Path, corpus: Path, rows: list[object] | str, expected: str) -> None:
    path = tmp_path / "bad.jsonl"
    if isinstance(rows, str):
        path.write_text(rows)
    else:
        _jsonl(path, rows)
    proc = run_cli("ingest", "--corpus", str(corpus), "--page-text", str(path), "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert expected in lines[0], lines[0]


def test_bad_page_text_is_one_line_exit_2_and_changes_nothing(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    good = {"document": "alpha.pdf", "page": 1, "text": "fine"}
    _fails(tmp_path, corpus, [good, {"document": "nope.pdf", "page": 1, "text": "x"}],
           "bad.jsonl:2: document 'nope.pdf' is not in the corpus")
    _fails(tmp_path, corpus, [good, {"document": "beta.pdf", "page": 3, "text": "x"}],
           "bad.jsonl:2: page 3 is out of range for beta.pdf: it has pages 1 to 2; fix the page number")
    _fails(tmp_path, corpus, [{"pdf_name": "beta.pdf", "markdown": "a\n---\nb\n---\nc"}],
           "bad.jsonl:1: the markdown of beta.pdf splits into 3 pages on '---' lines but the PDF has 2")
    _fails(tmp_path, corpus, '{"document": "alpha.pdf", "page": 1, "text": "x"}\n{not json\n',
           "bad.jsonl:2: not a JSON object")
    _fails(tmp_path, corpus, [good, {"document": "alpha.pdf", "page": 0, "text": "x"}],
           "bad.jsonl:2: 'page' is 0, not a page number")
    _fails(tmp_path, corpus, [good, {"document": "alpha.pdf", "page": "2", "text": "x"}],
           "bad.jsonl:2: 'page' is \"2\", not a page number")
    _fails(tmp_path, corpus, [good, {"document": "alpha.pdf", "page": 2}], "bad.jsonl:2: page 2 of alpha.pdf has no \"text\"")
    _fails(tmp_path, corpus, [good, {"page": 2, "text": "x"}], "bad.jsonl:2: no document name")
    _fails(tmp_path, corpus, [good, good], "bad.jsonl:2: page 1 of alpha.pdf is also given on line 1")
    _fails(tmp_path, corpus, "\n", "holds no pages")
    proc = run_cli("ingest", "--corpus", str(corpus), "--page-text", str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 2 and "missing.jsonl: no such file" in proc.stderr
    proc = run_cli("ingest", "--corpus", str(tmp_path / "new"), "--page-text", str(tmp_path / "bad.jsonl"))
    assert proc.returncode == 2 and "holds no pages" in proc.stderr
    _jsonl(tmp_path / "bad.jsonl", [good])
    proc = run_cli("ingest", "--corpus", str(tmp_path / "new"), "--page-text", str(tmp_path / "bad.jsonl"))
    assert proc.returncode == 2 and "is not a deskbench corpus yet; give the PDFs too" in proc.stderr
    assert not (tmp_path / "new").exists()
    proc = run_cli("ingest", "--corpus", str(corpus))
    assert proc.returncode == 2 and "give PDF files or folders" in proc.stderr
    # nothing was applied by the failed runs
    c = Corpus.open(corpus)
    assert c.store.supplied_counts() == {} and c.page_text("alpha.pdf", 1).text_source == "text_layer"
