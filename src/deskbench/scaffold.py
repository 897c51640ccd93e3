"""`deskbench init`: a small task set over the user's own files, to edit before a first run.

A user who has PDFs or spreadsheets but no tasks file should not have to learn the formats before
seeing a run: init writes valid tasks (every docqa evidence page exists in the ingested corpus,
every analytics input is copied beside the tasks), marked TODO where only the user knows the
question and answer, and the command that runs them with a baseline that needs no key.
A registry by track name (`SCAFFOLDERS`), so a track adds its own without an if-chain.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from deskbench.errors import UserError
from deskbench.tasks.jsonl import write_jsonl

TODO = "TODO"
SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".csv")


@dataclass
class Scaffolded:
    """What init made: the files written, warnings, and the next command as argv."""

    tasks: int
    files: int
    next_command: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def command_line(self) -> str:
        return shlex.join(self.next_command)


class Scaffolder(Protocol):
    """Writes a task set into the empty folder `dest` from the user's files under `source`
    (None: the bundled demo's files, to try init without one's own)."""

    def __call__(self, dest: Path, source: Path | None, *, workers: int,
                 on_file: Callable[[str], None] | None) -> Scaffolded: ...


def _found(source: Path, suffixes: tuple[str, ...], what: str, flag_hint: str) -> list[Path]:
    """The files under `source` (a file or a folder searched recursively) with one of `suffixes`."""
    if not source.exists():  # a typo: the files or folders of that kind nearby
        from deskbench.nearby import hint, nearby

        def holds(p: Path) -> bool:
            return p.suffix.lower() in suffixes or (p.is_dir() and any(c.suffix.lower() in suffixes for c in p.iterdir()))

        near = hint(source, nearby(source, holds), what)
        raise UserError(f"--from {source}: no such file or folder{near}; give the folder holding your {what}")
    if source.is_file():
        files = [source] if source.suffix.lower() in suffixes else []
    else:
        files = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)
    if not files:
        raise UserError(f"--from {source}: no {what} ({', '.join(suffixes)}) found; {flag_hint}")
    return files


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", Path(name).stem).strip("-").lower() or "doc"


def _unique(wanted: str, taken: set[str]) -> str:
    """`wanted`, or `wanted-2`, `-3`, ...: two files may slug alike (non-Latin names, folders)."""
    found, n = wanted, 1
    while found in taken:
        n += 1
        found = f"{wanted}-{n}"
    taken.add(found)
    return found


def _first_words(text: str, words: int = 12) -> str:
    found = text.split()
    return " ".join(found[:words]) + (" ..." if len(found) > words else "")


def _pick_pages(texts: dict[int, str], count: int = 3) -> list[int]:
    """Up to `count` pages spread over the document (first, middle, last), preferring pages with
    text: a placeholder on a blank page would be a poor start for a question."""
    with_text = [p for p in sorted(texts) if texts[p].strip()] or sorted(texts)
    if len(with_text) <= count:
        return with_text
    picks = [with_text[0], with_text[len(with_text) // 2], with_text[-1]][:count]
    return sorted(dict.fromkeys(picks))


def scaffold_docqa(dest: Path, source: Path | None, *, workers: int = 1,
                   on_file: Callable[[str], None] | None = None) -> Scaffolded:
    """Ingest the PDFs into dest/corpus (the ingest command's code) and write a few TODO questions
    per document, each citing a page the corpus holds."""
    from deskbench.corpus.extract import OcrSettings
    from deskbench.corpus.ingest import open_or_create, plan_ingest, run_ingest
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.docqa.tasks import DocQATask, Evidence

    pdfs = _found(source if source is not None else bundled_dir() / "docqa" / "pdfs", (".pdf",), "PDFs",
                  "give a folder with .pdf files (searched recursively)")
    corpus = open_or_create(dest / "corpus")
    plan = plan_ingest(corpus, pdfs)
    summary = run_ingest(corpus, plan, OcrSettings(), workers=workers,
                         on_file=(lambda doc, _n: on_file(doc)) if on_file else None)
    warnings = [f"{f.file}: not ingested ({f.reason})" for f in summary.files_failed]
    tasks: list[DocQATask] = []
    ids: set[str] = set()
    for doc in corpus.documents():
        texts = dict(zip(range(1, doc.page_count + 1),
                         corpus.page_texts([(doc.doc_id, p) for p in range(1, doc.page_count + 1)]), strict=True))
        for page in _pick_pages(texts):
            tasks.append(DocQATask(
                id=_unique(f"{_slug(doc.doc_id)}/p{page}", ids),
                question=(f"{TODO}: write a question answered on page {page} of {doc.doc_id} "
                          f"(the page begins: {_first_words(texts[page])!r})"),
                answer_variants=[[f"{TODO}: the answer"]],
                evidence=[Evidence(document=doc.doc_id, page=page)],
            ))
    if not tasks:
        raise UserError(f"--from {source}: none of the PDFs could be read ({'; '.join(warnings)}); "
                        "give PDFs that open")
    write_jsonl(dest / "tasks.jsonl", tasks)
    command = ["deskbench", "run", "--tasks", str(dest / "tasks.jsonl"), "--corpus", str(dest / "corpus"),
               "--agent", "lexical", "--out", str(dest / "runs" / "lexical")]
    _readme(dest, "docqa", [
        "corpus/      your PDFs, ingested (deskbench ingest corpus/ MORE.pdf adds more)",
        "tasks.jsonl  one question a line, 3 per document; edit each TODO:",
        "             question, answer_variants (every acceptable answer), evidence (the pages",
        "             that answer it; pages are 1-based)",
    ], command, "The lexical agent needs no model or key; add --agent bm25-agent --model ... for a model.")
    return Scaffolded(tasks=len(tasks), files=summary.files_ok, next_command=command, warnings=warnings)


def scaffold_analytics(dest: Path, source: Path | None, *, workers: int = 1,
                       on_file: Callable[[str], None] | None = None) -> Scaffolded:
    """Copy the spreadsheets into dest/inputs (their folders kept, so equal names do not collide)
    and write one TODO question per file that refers to it."""
    from deskbench.generate.demo import bundled_dir
    from deskbench.tracks.analytics.tasks import AnalyticsTask

    root = source if source is not None else bundled_dir() / "analytics" / "inputs"
    sheets = _found(root, SPREADSHEET_SUFFIXES, "spreadsheets",
                    "give a folder with .xlsx, .xlsm or .csv files (searched recursively)")
    tasks: list[AnalyticsTask] = []
    ids: set[str] = set()
    for path in sheets:
        relative = path.name if root.is_file() else path.relative_to(root).as_posix()
        target = dest / "inputs" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        if on_file:
            on_file(relative)
        tasks.append(AnalyticsTask(
            id=_unique(re.sub(r"[^A-Za-z0-9]+", "-", Path(relative).with_suffix("").as_posix()).strip("-").lower()
                       or "sheet", ids),
            category="qa",
            instruction=f"{TODO}: ask a question about {Path(relative).name} whose answer is one figure or name.",
            inputs=[f"inputs/{relative}"],
            difficulty_steps=1,
            answer=f"{TODO}: the reference answer",
            computation=f"{TODO}: how the answer is computed from the file (for you and the judge)",
        ))
    write_jsonl(dest / "tasks.jsonl", tasks)
    command = ["deskbench", "run", "--tasks", str(dest / "tasks.jsonl"), "--agent", "analyst-agent",
               "--model", "local", "--max-rounds", "3", "--out", str(dest / "runs" / "analyst-local")]
    _readme(dest, "analytics", [
        "inputs/      your spreadsheets, copied",
        "tasks.jsonl  one task a line, 1 per file; edit each TODO: instruction, answer",
        "             (and answer_value, a number, for a numeric answer), computation;",
        "             'category' may also be visualization or file_generation (see docs/formats.md)",
    ], command, "--model local runs a small model on this machine (no key; slow); give openai/... for a real one.")
    return Scaffolded(tasks=len(tasks), files=len(sheets), next_command=command)


def _readme(dest: Path, track: str, lines: list[str], command: list[str], note: str) -> None:
    text = "\n".join([
        f"A deskbench {track} task set made by `deskbench init`. Lines marked TODO are placeholders:",
        "replace them with your own questions and answers before trusting a score.",
        "",
        *lines,
        "",
        f"The formats: `deskbench schema {track}` (JSON Schema) and docs/formats.md.",
        "Run it:",
        "",
        "    " + shlex.join(command),
        "",
        note,
        "",
    ])
    (dest / "README.txt").write_text(text, encoding="utf-8")


SCAFFOLDERS: dict[str, Scaffolder] = {"docqa": scaffold_docqa, "analytics": scaffold_analytics}


def scaffold(track: str, dest: Path, source: Path | None, *, workers: int = 1,
             on_file: Callable[[str], None] | None = None) -> Scaffolded:
    """Make the task set; refuses a `dest` that holds anything (init never mixes with a user's files).
    A failure removes the folder it created, so the command can be run again as it was."""
    maker = SCAFFOLDERS.get(track)
    if maker is None:
        raise UserError(f"--track {track!r}: init scaffolds {' or '.join(SCAFFOLDERS)}; "
                        "for deliverables copy a package from 'deskbench generate deliverables'")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest} exists and is not an empty folder; give a new folder for the task set")
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return maker(dest, source, workers=workers, on_file=on_file)
    except BaseException:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        raise
