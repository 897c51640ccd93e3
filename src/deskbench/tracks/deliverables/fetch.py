"""`deskbench fetch dra`: the consulting DRA paper's released corpus (Hugging Face
deccan-ai/dra-bench, gated) turned into deliverables task packages.

What the release is, as far as its dataset card and the paper say (docs/deliverables-dra.md names
every assumption): a configuration `tasks` (the default) with one split `test` of 42 rows, one
row per task with its prompt, the path of its input files in the repository, the SME's sanity
check (Lazy AI Test / Expert Test), the solution logic and the verifiers as prose; a second
configuration `responses` (the three agents' reference responses) that this command does not
download. Columns are matched by name, case and spacing aside, against the aliases in COLUMNS
(the authors' loader matches its CSV's columns the same way).

Each row becomes `OUT/tasks/<id>/` with task.yaml and a copy of its input files: the verifier
prose read as the authors' code reads it (verifier_prose.py), the required output files found
in the prompt as the authors' harness finds them (a Word document; an Excel or PowerPoint file
after a verb such as produce or create), the corpus discipline from its column or, without one,
from the prompt's wording. A row that cannot be a package (no prompt, no verifier, an input path
outside the snapshot or missing) is skipped with its reason. The snapshot (hub download) is kept
in OUT/snapshot; OUT/fetch.json says what was done. The tasks' text is written only under OUT:
the release's terms forbid redistributing it, so none of it is in this repository, and
OUT/.gitignore (`*`) keeps a git checkout that holds OUT from committing it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.fetch import snapshot
from deskbench.tracks.deliverables.tasks import (
    PromptClass,
    dump_task,
    load_package,
    parse_task,
    table19_rubric,
)
from deskbench.tracks.deliverables.verifier_prose import (
    Target,
    numeric_fields,
    read_target,
    spec_for,
    split_verifiers,
)

REPO_ID = "deccan-ai/dra-bench"
CONFIG, SPLIT = "tasks", "test"
CLASSES: dict[str, PromptClass] = {"CRP": "CRP", "RCP": "RCP", "SCP": "SCP", "LDP": "LDP", "FSP": "FSP"}
CLASS_NAMES = {"constrained research": "CRP", "relevance compression": "RCP", "structural compliance": "SCP",
               "latent decomposition": "LDP", "failure sensitive": "FSP", "failure-sensitive": "FSP"}
COLUMNS: dict[str, tuple[str, ...]] = {  # field -> accepted column names (lower case, spaces for _ and -)
    "id": ("task id", "taskid", "id", "task", "prompt id"),
    "prompt_class": ("prompt class", "prompt type", "class", "type", "category", "prompt category"),
    "prompt": ("prompt", "prompts", "prompt text", "question", "research question"),
    "inputs": ("inputs path", "input path", "inputs", "input files", "input folder", "files", "inputs dir",
               "input dir", "file paths", "input files link", "attachments"),
    "sanity_check": ("sanity check", "sanity checks", "sanity"),
    "solution_logic": ("solution logic", "corrected solution logic", "solution", "golden answer derivation",
                       "derivation"),
    "verifiers": ("verifiers", "verifier", "prompt specific verifiers", "original verifiers"),
    "discipline": ("corpus discipline", "discipline", "corpus"),
    "domain": ("domain", "sector", "industry"),
    "golden": ("golden answer", "golden", "golden deliverable", "answer", "golden range"),
}
DISCIPLINES = ("closed", "hybrid", "open")
_OUTPUT_VERB = r"(?:present|output|create|produce|generate|deliver|build)"
_OUTPUTS = {  # the authors' harness: a file deliverable asked for in so many words
    "xlsx": re.compile(rf"\b{_OUTPUT_VERB}\b[^.!?\n]{{0,120}}\bexcel\b", re.I),
    "docx": re.compile(r"\bword\s+doc(?:ument)?\b", re.I),
    "pptx": re.compile(rf"\b{_OUTPUT_VERB}\b[^.!?\n]{{0,120}}\b(?:powerpoint|power\s+point)\b", re.I),
}
_NAMED = re.compile(r"^\s*(?:file|workbook|spreadsheet|document|doc|deck|presentation|slides?)?\s*,?\s*"
                    r"(?:named|titled|called)\s+[\"'\u201c\u2018*_]*(?P<name>[A-Za-z0-9][^\"'\u201d\u2019*_\n.,;:()]{2,80})",
                    re.I)
_NAME_END = re.compile(r"\s+(?:with|containing|that|which|including|and|for|to|in|showing|where|on)\b.*$", re.I | re.S)
_NO_WEB = re.compile(r"\b(?:do\s+not|don't|never|no|without)\s+(?:browse|search|use|access)\w*\s+(?:the\s+)?"
                     r"(?:web|internet|online)|\b(?:using|use|rely)\s+only\s+(?:on\s+)?(?:the\s+)?(?:internal\s+|client\s+)?"
                     r"(?:files|data|documents|inputs)|\bonly\s+the\s+(?:internal\s+)?files\s+(?:provided|given|shared)", re.I)
_ONE_SOURCE = re.compile(r"\b(?:may|can)\s+be\s+used\s+from\b|\bauthori[sz]ed\s+(?:external\s+)?sources?\b|"
                         r"\bonly\s+(?:authorized|permitted|allowed)\s+(?:external\s+)?sources?\b", re.I)


@dataclass(frozen=True)
class DraFetchOptions:
    out: Path
    source: Path | None = None  # a snapshot folder; None: the hub
    limit: int | None = None  # the first N tasks


class SkippedTask(BaseModel):
    id: str
    reason: str


class FetchedTask(BaseModel):
    """One package written, with how its parts were read."""

    id: str
    package: str
    prompt_class: str
    corpus_discipline: str
    discipline_from: str  # "column" or "prompt": read from the prompt's wording
    inputs: int
    outputs: list[str] = Field(default_factory=list)
    verifiers: int
    verifier_parse: str  # clean | uncertain (the authors' invariants)
    verifier_problems: list[str] = Field(default_factory=list)
    verifier_kinds: dict[str, int] = Field(default_factory=dict)


class DraFetchSummary(BaseModel):
    """What `deskbench fetch dra` did; OUT/fetch.json and the --json output."""

    source: str
    revision: str | None = None
    tasks_dir: str
    tasks: list[FetchedTask] = Field(default_factory=list)
    skipped: list[SkippedTask] = Field(default_factory=list)


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


def resolve_columns(names: Sequence[str]) -> dict[str, str]:
    """Field -> the row's column holding it (first alias that matches wins)."""
    by_key = {_key(n): n for n in names}
    picked = {f: by_key[a] for f, aliases in COLUMNS.items() for a in reversed(aliases) if a in by_key}
    missing = [f for f in ("id", "prompt", "verifiers") if f not in picked]
    if missing:
        raise UserError(f"the release's {CONFIG} rows have no column for {', '.join(missing)} (columns: "
                        f"{', '.join(names)}); is this a deccan-ai/dra-bench snapshot? docs/deliverables-dra.md "
                        "lists the names read")
    return picked


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    return str(value).strip()


def prompt_class(value: str, task_id: str) -> PromptClass | None:
    """CRP..FSP from the class column (a code or the class's name), else from the task id."""
    for text in (value, task_id):
        upper = text.upper()
        for code in CLASSES:
            if re.search(rf"(?<![A-Z]){code}(?![A-Z])", upper):
                return CLASSES[code]
        low = text.lower()
        for name, code in CLASS_NAMES.items():
            if name in low:
                return CLASSES[code]
    return None


def discipline(value: str, prompt: str) -> tuple[str, str]:
    """closed / hybrid / open and where it was read: the column, else the prompt's wording (only
    the provided files and one named source allowed: hybrid; only the files or no web: closed)."""
    low = value.strip().lower()
    for d in DISCIPLINES:
        if low.startswith(d):
            return d, "column"
    if _NO_WEB.search(prompt):
        return ("hybrid" if _ONE_SOURCE.search(prompt) else "closed"), "prompt"
    return ("hybrid" if _ONE_SOURCE.search(prompt) else "open"), "prompt"


def required_outputs(prompt: str) -> list[dict[str, Any]]:
    """The files the prompt asks for (the authors' harness's rule: "Word document"; "Excel" or
    "PowerPoint" after a verb such as produce or create), each named as the prompt names it right
    after ("a Word document named X containing ...": X) or answer.<ext>."""
    outputs = []
    for fmt, pattern in _OUTPUTS.items():
        m = pattern.search(prompt)
        if m is None:
            continue
        named = _NAMED.search(prompt[m.end():m.end() + 160])  # "... Word document named X containing ..."
        stem = re.sub(r"[\\/]+", " ", _NAME_END.sub("", named.group("name"))).strip() if named else ""
        stem = stem if len(stem) >= 3 else "answer"
        outputs.append({"name": f"{stem}.{fmt}", "format": fmt})
    return outputs


def sanity_tests(text: str) -> tuple[str, str]:
    """(Lazy AI Test, Expert Test) from the sanity check; the whole text for both when it does not
    name them."""
    m_lazy = re.search(r"lazy\s*ai\s*test\s*[.:\-\u2013]?", text, re.I)
    m_expert = re.search(r"expert\s*test\s*[.:\-\u2013]?", text, re.I)
    if m_lazy and m_expert and m_lazy.end() <= m_expert.start():
        lazy, expert = text[m_lazy.end():m_expert.start()].strip(), text[m_expert.end():].strip()
        if lazy and expert:
            return lazy, expert
    return text, text


def _steps(text: str) -> list[str]:
    return [re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", line).strip() for line in text.splitlines() if line.strip()]


def _unique_ids(specs: list[dict[str, Any]]) -> None:
    seen: dict[str, int] = {}
    for spec in specs:
        base = spec["id"]
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:  # an UNCERTAIN parse may number two records alike: ids stay unique
            spec["id"] = f"{base}-{seen[base]}"


def _golden(golden: str, solution: list[str], targets: list[tuple[str, Target]]) -> dict[str, Any]:
    values = []
    for vid, t in targets:
        if t.kind != "numeric" or not isinstance(t.value, float):
            continue
        values.append({"name": vid, **numeric_fields(t, "value")})
    decision = next((str(t.value) for _, t in targets if t.kind == "decision"), None)
    out: dict[str, Any] = {"answer": golden or solution[-1], "values": values}
    if decision:
        out["decision"] = decision
    return out


def _inputs(root: Path, value: Any) -> list[Path] | str:
    """The input files a row names (a folder, files, or several separated by newlines, ; or ,),
    or why they cannot be had."""
    raw = value if isinstance(value, list) else re.split(r"[\n;,]+", _text(value))
    paths = [str(p).strip() for p in raw if str(p).strip()]
    if not paths:
        return "no input files named"
    files: list[Path] = []
    base = root.resolve()
    for p in paths:
        p = p.removeprefix("./")
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", p):
            return f"its inputs are a link ({p[:60]}), not files in the snapshot; deskbench reads the release's files only"
        target = (root / p).resolve()
        if os.path.isabs(p) or not target.is_relative_to(base):
            return f"input path {p!r} points outside the snapshot; refused"
        if target.is_dir():
            files += sorted(f for f in target.rglob("*") if f.is_file() and not any(
                part.startswith(".") for part in f.relative_to(target).parts))
        elif target.is_file():
            files.append(target)
        else:
            return f"input path {p!r} is not in the snapshot (an incomplete download? run this again)"
    return files if files else "its input folder holds no file"


ZIP_LIMIT = 512 << 20  # bytes a task's zipped inputs may unpack to (the paper's files are 2 KB - 430 KB)


def _unzip(path: Path, dest: Path) -> list[tuple[str, Path]] | str:
    """The files of a zipped input folder, unpacked under `dest` (folders, hidden files and
    __MACOSX left out), or why not."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            members = [m for m in z.infolist() if not m.is_dir() and not any(
                part.startswith(".") or part == "__MACOSX" for part in Path(m.filename).parts)]
            if sum(m.file_size for m in members) > ZIP_LIMIT:
                return f"{path.name} unpacks to more than {ZIP_LIMIT >> 20} MB; refused"
            out = []
            for i, m in enumerate(members):
                target = dest / f"{i}"
                target.write_bytes(z.read(m))
                out.append((Path(m.filename).name, target))
            return out
    except (zipfile.BadZipFile, OSError) as exc:
        return f"{path.name} is not a readable zip ({exc})"


def _copy_inputs(files: list[Path], pkg: Path) -> list[str] | str:
    """Copy the files flat into the package (the agent sees /mnt/data/<name>), a zip's files
    unpacked; two files of one name keep their parent folder's name in front."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        named: list[tuple[str, str, Path]] = []  # (name, parent, file)
        for f in files:
            if f.suffix.lower() == ".zip":
                got = _unzip(f, Path(tmp))
                if isinstance(got, str):
                    return got
                named += [(name, f.stem, file) for name, file in got]
            else:
                named.append((f.name, f.parent.name, f))
        counts: dict[str, int] = {}
        for name, _, _ in named:
            counts[name] = counts.get(name, 0) + 1
        names: list[str] = []
        for name, parent, file in named:
            final = name if counts[name] == 1 else f"{parent}_{name}"
            if final in names:
                return f"two input files would both be {final!r}"
            shutil.copyfile(file, pkg / final)
            names.append(final)
    return names


def _package_dir(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", task_id).strip(".-") or "task"


def build_package(row: Mapping[str, Any], columns: dict[str, str], root: Path, tasks_dir: Path,
                  taken: set[str] | frozenset[str] = frozenset()) -> FetchedTask | SkippedTask:
    """One release row as a package under `tasks_dir` (or why not); `taken`: the package folders
    earlier rows wrote, which a row of the same id must not overwrite."""
    def get(name: str) -> str:
        return _text(row.get(columns[name])) if name in columns else ""

    task_id = re.sub(r"^(\d+)\.0([A-Za-z]*)$", r"\1\2", get("id"))  # "28115.0" from a spreadsheet: 28115
    if not task_id:
        return SkippedTask(id="", reason="no task id")
    if _package_dir(task_id) in taken:
        return SkippedTask(id=task_id, reason="a second row with this id; the first is kept")
    prompt = get("prompt")
    if not prompt:
        return SkippedTask(id=task_id, reason="no prompt")
    cls = prompt_class(get("prompt_class"), task_id)
    if cls is None:
        return SkippedTask(id=task_id, reason=f"no prompt class (CRP, RCP, SCP, LDP, FSP) in {get('prompt_class')!r}")
    parse = split_verifiers(get("verifiers"))
    if not parse.records:
        return SkippedTask(id=task_id, reason=f"no verifier could be read ({'; '.join(parse.reasons)})")
    solution = _steps(get("solution_logic"))
    sanity = get("sanity_check")
    if not solution or not sanity:
        return SkippedTask(id=task_id, reason="no " + ("solution logic" if not solution else "sanity check"))
    files = _inputs(root, row.get(columns["inputs"])) if "inputs" in columns else "no input column"
    if isinstance(files, str):
        return SkippedTask(id=task_id, reason=files)
    targets = [(f"V{r.label}", read_target(r.text)) for r in parse.records]
    specs = [spec_for(r, t, prompt) for r, (_, t) in zip(parse.records, targets, strict=True)]
    _unique_ids(specs)
    lazy, expert = sanity_tests(sanity)
    disc, disc_from = discipline(get("discipline"), prompt)
    pkg = tasks_dir / _package_dir(task_id)
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    inputs = _copy_inputs(files, pkg)
    if isinstance(inputs, str):
        shutil.rmtree(pkg)
        return SkippedTask(id=task_id, reason=inputs)
    data: dict[str, Any] = {
        "id": task_id, "title": get("domain"), "prompt_class": cls, "corpus_discipline": disc, "prompt": prompt,
        "inputs": inputs, "required_outputs": required_outputs(prompt),
        "golden": _golden(get("golden"), solution, targets), "solution_logic": solution,
        "lazy_ai_test": lazy, "expert_test": expert, "verifiers": specs,
        "rubric": [c.model_dump() for c in table19_rubric()],
    }
    try:
        task = parse_task(data, pkg / "task.yaml")
    except UserError as exc:
        shutil.rmtree(pkg)
        return SkippedTask(id=task_id, reason=f"not a valid package: {exc}")
    (pkg / "task.yaml").write_text(dump_task(task), encoding="utf-8")
    load_package(pkg)  # what `run` will read
    kinds: dict[str, int] = {}
    for s in task.verifiers:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    return FetchedTask(id=task_id, package=str(pkg), prompt_class=cls, corpus_discipline=disc,
                       discipline_from=disc_from, inputs=len(task.inputs),
                       outputs=[o.name for o in task.required_outputs], verifiers=len(task.verifiers),
                       verifier_parse=parse.status, verifier_problems=parse.reasons, verifier_kinds=kinds)


def _task_patterns(card: Path) -> list[str]:
    files = snapshot.data_files(card)
    config = CONFIG if CONFIG in files else "default" if "default" in files else None
    if config is None or SPLIT not in files[config]:
        raise UserError(f"{REPO_ID}'s dataset card names no {CONFIG}/{SPLIT} files (it has: "
                        f"{', '.join(f'{c}/{s}' for c, sp in files.items() for s in sp)}); docs/deliverables-dra.md "
                        "says what this command expects")
    return ["README.md", *files[config][SPLIT]]


def _rows(root: Path) -> list[dict[str, Any]]:
    files = snapshot.data_files(root / "README.md")
    config = CONFIG if CONFIG in files else "default"
    return snapshot.read_rows(snapshot.split_paths(root, files, config, SPLIT))


def fetch_dra(options: DraFetchOptions, on_task: Callable[[str], None] | None = None) -> DraFetchSummary:
    """Packages from the release (the module's docstring); skipped rows are in the summary."""
    if options.limit is not None and options.limit < 1:
        raise UserError(f"--limit {options.limit} is not valid; use 1 or more")
    try:
        options.out.mkdir(parents=True, exist_ok=True)
        # the tasks' text must not be redistributed: a git checkout that holds OUT ignores all of it
        (options.out / ".gitignore").write_text("# deskbench fetch dra: the DRA tasks may not be redistributed\n*\n",
                                                encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot create --out {options.out}: {exc.strerror or exc}; choose another folder") from exc
    revision = None
    if options.source is not None:
        root = options.source
        if not (root / "README.md").is_file():
            raise UserError(f"--from {root}: no README.md (dataset card) there; give the folder `hf download "
                            f"{REPO_ID} --repo-type dataset --local-dir DIR` made")
        source = str(root)
    else:
        root = options.out / "snapshot"
        revision = snapshot.hub_snapshot(REPO_ID, root, _task_patterns)
        source = f"{snapshot.shown_endpoint()}/datasets/{REPO_ID}"
    rows = _rows(root)
    if not rows:
        raise UserError(f"{root}: the {CONFIG}/{SPLIT} split has no rows; download the snapshot again")
    columns = resolve_columns(list(rows[0]))
    if options.limit is not None:
        rows = rows[:options.limit]
    if options.source is None and "inputs" in columns:  # the input files of these rows only
        wanted = [p for r in rows for p in _input_patterns(r.get(columns["inputs"]))]
        if wanted:
            snapshot.hub_snapshot(REPO_ID, root, lambda _card: wanted)
    tasks_dir = options.out / "tasks"
    if tasks_dir.exists():
        shutil.rmtree(tasks_dir)  # derived from the snapshot: made again whole
    tasks_dir.mkdir(parents=True)
    summary = DraFetchSummary(source=source, revision=revision, tasks_dir=str(tasks_dir))
    seen: set[str] = set()
    for row in rows:
        got = build_package(row, columns, root, tasks_dir, seen)
        if isinstance(got, SkippedTask):
            summary.skipped.append(got)
        else:
            seen.add(_package_dir(got.id))
            summary.tasks.append(got)
        if on_task is not None:
            on_task(got.id)
    try:
        tmp = options.out / ".fetch.json.tmp"
        tmp.write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, options.out / "fetch.json")
    except OSError as exc:
        raise UserError(f"cannot write {options.out / 'fetch.json'}: {exc}") from exc
    return summary


def _input_patterns(value: Any) -> list[str]:
    """Hub file patterns for a row's input paths (a folder: everything under it)."""
    raw = value if isinstance(value, list) else re.split(r"[\n;,]+", _text(value))
    out = []
    for p in (str(v).strip().removeprefix("./").rstrip("/") for v in raw):
        if p and not os.path.isabs(p) and ".." not in Path(p).parts:
            out += [p, f"{p}/*"]
    return out
