"""`deskbench fetch aida`: AIDABench's release (Hugging Face MichaelYang-lyx/AIDA) as analytics tasks.

The dataset card names no `configs:` (it is not a table the hub's viewer reads): the release is
folders of files, one a split (`QA_en/`, `file_generation_en/`, ...), each with its manifest
(`QA_en/QA_en.jsonl`, one JSON object a line: `id`, `question`, `input_file`, ...) and the task
files beside it (`input/<id>/<name>`, `reference/<id>/<name>`); tracks/analytics/aida.py says
which fields it reads and why. So a manifest is found by what it holds, not by a file name: a
`.jsonl` file of the snapshot whose first row has an `id` with the release's `QA_`/`DV_`/`FG_`
prefix and a `question`. Each manifest is imported with the analytics importer
(aida.import_release, the same code as `deskbench import-tasks aida`) into its own tasks file: the
Chinese and English splits share their ids, so they cannot share a file.

Under --out DIR:

    DIR/snapshot/             the dataset's files, when fetched from the hub (else --from DIR is read)
    DIR/tasks/<split>.jsonl   each manifest's tasks (input paths relative to DIR/tasks/)
    DIR/fetch.json            what this run did (the summary --json prints)

The hub download is the one `fetch madqa` uses (fetch/snapshot.py: the user's token, HF_ENDPOINT,
a refusal in one line); files already there and current are not downloaded again, and
huggingface_hub continues a file a killed run left unfinished. Nothing is downloaded unless this
command is run.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from deskbench.errors import UserError
from deskbench.fetch import snapshot
from deskbench.tasks.jsonl import first_row

REPO_ID = "MichaelYang-lyx/AIDA"
PAGE = f"https://huggingface.co/datasets/{REPO_ID}"
PREFIXES = ("QA_", "DV_", "FG_")  # the release's id prefixes (aida.CATEGORY_OF_PREFIX)


@dataclass(frozen=True)
class AidaFetchOptions:
    out: Path
    source: Path | None = None  # a snapshot folder; None: the hub
    splits: tuple[str, ...] = ()  # split folders (or manifest names) to import; () all of them
    difficulty_steps: int | None = None  # for rows without a step count (the release has none)


class ManifestImport(BaseModel):
    """One manifest's import: where its tasks went, how many of each category, what was skipped."""

    split: str  # the manifest's name without .jsonl (QA_en)
    manifest: str  # its path in the snapshot
    tasks_file: str
    tasks: int
    by_category: dict[str, int] = Field(default_factory=dict)
    skipped: dict[str, list[str]] = Field(default_factory=dict)  # reason -> task ids


class AidaFetchSummary(BaseModel):
    """What `deskbench fetch aida` did; DIR/fetch.json and the --json output."""

    source: str
    revision: str | None = None  # the hub commit downloaded
    snapshot: str
    imports: list[ManifestImport] = Field(default_factory=list)


def _hidden(path: Path, root: Path) -> bool:
    """huggingface_hub keeps its bookkeeping under `.cache/` in the local folder: not the dataset."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def is_manifest(path: Path) -> bool:
    """Whether a JSON Lines file is an AIDA split manifest: its first row has an id with the
    release's prefix and a question (any other .jsonl of the snapshot is left alone)."""
    row = first_row(path)
    return (isinstance(row, dict) and isinstance(row.get("id"), str) and "question" in row
            and str(row["id"]).upper().startswith(PREFIXES))


def find_manifests(root: Path, splits: tuple[str, ...] = ()) -> list[Path]:
    """The snapshot's AIDA manifests, in path order; with `splits`, those whose name (or folder)
    is one of them, each split named having to be found."""
    found = sorted(p for p in root.rglob("*.jsonl") if p.is_file() and not _hidden(p, root) and is_manifest(p))
    if not splits:
        if not found:
            raise UserError(f"{root} holds no AIDA manifest (a .jsonl whose rows have ids QA_n, DV_n or FG_n and a "
                            f"question); give the folder `hf download {REPO_ID} --repo-type dataset --local-dir DIR` "
                            "made")
        return found
    chosen = []
    for split in splits:
        hits = [p for p in found if split in (p.stem, p.parent.name)]
        if not hits:
            names = ", ".join(sorted({p.stem for p in found})) or "none"
            raise UserError(f"--split {split!r}: {root} has no AIDA manifest of that name (it has: {names})")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def hub_patterns(splits: tuple[str, ...]) -> list[str]:
    """The files the hub download needs: the card, and every file (or only the named splits'
    folders, with the manifests among them)."""
    if not splits:
        return ["*"]
    return ["README.md", *(p for s in splits for p in (f"{s}/*", f"*/{s}/*", f"{s}.jsonl", f"*/{s}.jsonl"))]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _tasks_names(manifests: list[Path], root: Path) -> dict[Path, str]:
    """Each manifest's tasks file name: its stem, or its path when two share a stem."""
    stems = Counter(m.stem for m in manifests)
    return {m: (m.stem if stems[m.stem] == 1 else m.relative_to(root).with_suffix("").as_posix().replace("/", "-"))
            for m in manifests}


def fetch_aida(options: AidaFetchOptions) -> AidaFetchSummary:
    """The release (from the hub or a snapshot folder), then each manifest imported (see the
    module's docstring)."""
    from deskbench.tracks.analytics.aida import import_release

    if options.difficulty_steps is not None and options.difficulty_steps < 1:
        raise UserError(f"--difficulty-steps {options.difficulty_steps} is not valid; use 1 or more")
    for split in options.splits:
        if not split or any(c in split for c in "/\\*?[") or split.startswith("."):
            raise UserError(f"--split {split!r} is not a split name; give a folder or manifest name such as QA_en")
    out = options.out
    try:
        (out / "tasks").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror or exc}; choose another folder") from exc
    if options.source is not None:
        root = options.source
        if root.exists() and not root.is_dir():
            raise UserError(f"--from {root} is a file; give the snapshot folder `hf download {REPO_ID} --repo-type "
                            "dataset --local-dir DIR` made")
        if not root.is_dir():
            from deskbench.paths import missing

            raise missing(root, lambda p: p.is_dir() and any(p.glob("*/*.jsonl")), "snapshot folders",
                          f"give the folder `hf download {REPO_ID} --repo-type dataset --local-dir DIR` made")
        summary = AidaFetchSummary(source=str(root), snapshot=str(root))
    else:
        root = out / "snapshot"
        revision = snapshot.hub_snapshot(REPO_ID, root, lambda _card: hub_patterns(options.splits))
        summary = AidaFetchSummary(source=f"{snapshot.shown_endpoint()}/datasets/{REPO_ID}", revision=revision,
                                   snapshot=str(root))
    manifests = find_manifests(root, options.splits)
    names = _tasks_names(manifests, root)
    for manifest in manifests:
        tasks_file = out / "tasks" / f"{names[manifest]}.jsonl"
        result = import_release(manifest, tasks_file, difficulty_steps=options.difficulty_steps)
        summary.imports.append(ManifestImport(
            split=names[manifest], manifest=manifest.relative_to(root).as_posix(), tasks_file=str(tasks_file),
            tasks=len(result.tasks), by_category=dict(sorted(Counter(t.category for t in result.tasks).items())),
            skipped=result.skipped))
    _write_atomic(out / "fetch.json", summary.model_dump_json(indent=2) + "\n")
    return summary
