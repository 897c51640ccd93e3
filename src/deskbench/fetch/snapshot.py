"""A Hugging Face dataset as files: a snapshot folder, its `configs:`, its rows; and the hub
download that makes one.

A snapshot folder is what `hf download REPO --repo-type dataset --local-dir DIR` (earlier
`huggingface-cli download`) leaves: the repository's files at their paths, the dataset card
`README.md` among them. The card's YAML header names each configuration's files per split
(`configs: - config_name: NAME, data_files: [{split: S, path: PATTERN or [PATTERNS]}]`, the
shapes the hub documents: a pattern, a list of them, or a mapping split -> patterns); rows are
read from parquet (pyarrow) and JSON Lines files.

The hub download uses the user's token (HF_TOKEN, else the one `hf auth login` stored) and the
endpoint in HF_ENDPOINT; a gated repository without a token, or whose terms the token's user has
not accepted, is one line saying what to do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from deskbench.errors import UserError

DataFiles = dict[str, dict[str, list[str]]]  # config -> split -> path patterns
HUB = "https://huggingface.co"
LOGIN = "`hf auth login` (or `huggingface-cli login` with huggingface_hub before 1.0), or set HF_TOKEN"


def card_header(readme: Path) -> dict[str, Any]:
    """The YAML header of a dataset card (between its first two `---` lines)."""
    try:
        text = readme.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UserError(f"{readme.parent} has no README.md, so it is not a dataset snapshot; give the folder "
                        f"`hf download REPO --repo-type dataset --local-dir DIR` made") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{readme}: cannot read the dataset card ({exc}); download the snapshot again") from exc
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in (s.strip() for s in lines[1:]):
        raise UserError(f"{readme} has no YAML header (--- ... ---) naming the dataset's files; "
                        "download the snapshot again")
    end = next(i for i, s in enumerate(lines[1:], 1) if s.strip() == "---")
    try:
        header = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{readme}: its YAML header does not parse ({str(exc).splitlines()[0]}); "
                        "download the snapshot again") from exc
    if not isinstance(header, dict):
        raise UserError(f"{readme}: its YAML header is not a mapping; download the snapshot again")
    return header


def _patterns(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise UserError(f"{where}: a data_files path must be a pattern or a list of patterns; "
                    "download the snapshot again")


def data_files(readme: Path) -> DataFiles:
    """Every configuration's files per split, from the card's `configs:`."""
    configs = card_header(readme).get("configs")
    if not isinstance(configs, list) or not configs:
        raise UserError(f"{readme}: its YAML header has no `configs:` naming the data files; "
                        "download the snapshot again")
    found: DataFiles = {}
    for i, config in enumerate(configs):
        where = f"{readme} configs[{i}]"
        if not isinstance(config, dict) or "data_files" not in config:
            raise UserError(f"{where}: no data_files; download the snapshot again")
        name = str(config.get("config_name", "default"))
        files = config["data_files"]
        splits: dict[str, list[str]] = {}
        if isinstance(files, dict):
            for split, paths in files.items():
                splits[str(split)] = _patterns(paths, where)
        elif isinstance(files, list) and all(isinstance(f, dict) for f in files):
            for f in files:
                if "split" not in f or "path" not in f:
                    raise UserError(f"{where}: each data_files entry needs a split and a path")
                splits[str(f["split"])] = _patterns(f["path"], where)
        else:
            splits["train"] = _patterns(files, where)  # no split named: the hub calls it train
        found[name] = splits
    return found


def split_paths(root: Path, files: DataFiles, config: str, split: str) -> list[Path]:
    """The files of one split, in name order (the hub's order of shards)."""
    if config not in files:
        raise UserError(f"{root / 'README.md'} names no configuration {config!r} (it has: {', '.join(files)}); "
                        "is this the right dataset's snapshot?")
    if split not in files[config]:
        raise UserError(f"configuration {config!r} of {root} has no split {split!r}; it has "
                        f"{', '.join(files[config])}")
    paths: set[Path] = set()
    for pattern in files[config][split]:
        paths.update(p for p in root.glob(pattern) if p.is_file())
    if not paths:
        raise UserError(f"{root}: no file matches {files[config][split]} (configuration {config!r}, split "
                        f"{split!r}); the snapshot is incomplete: download it again")
    return sorted(paths)


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """Every row of the files, in order: parquet via pyarrow, JSON Lines, or a JSON list."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            from deskbench.requirements import Extra, check

            check("reading the dataset's parquet files", [Extra("pyarrow.parquet", "madqa")])
            import pyarrow.parquet as pq

            try:
                rows.extend(pq.read_table(path).to_pylist())
            except Exception as exc:  # pyarrow's own errors (ArrowInvalid, OSError): a damaged file
                raise UserError(f"{path}: not a readable parquet file ({exc}); download the snapshot again") from exc
        elif suffix in (".jsonl", ".json"):
            text = path.read_text(encoding="utf-8")
            if suffix == ".json" and text.lstrip().startswith("["):
                rows.extend(json.loads(text))
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise UserError(f"{path}:{number}: not JSON ({exc}); download the snapshot again") from exc
        else:
            raise UserError(f"{path}: deskbench reads parquet and JSON Lines data files, not {suffix or 'this'}")
    return rows


def token_source() -> str | None:
    """Where the hub token comes from, or None when there is none."""
    from huggingface_hub import get_token

    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return "HF_TOKEN"
    return "the token `hf auth login` stored" if get_token() else None


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or HUB).rstrip("/")


def shown_endpoint() -> str:
    """The endpoint as printed or kept: HF_ENDPOINT without credentials (deskbench.redact)."""
    from deskbench.redact import redact_url

    return redact_url(endpoint())


def hub_snapshot(repo_id: str, dest: Path, patterns_for: Callable[[Path], list[str]]) -> str:
    """Download `repo_id`'s dataset card, then the files `patterns_for(card)` names, into `dest`
    (files already there and current are not downloaded again); returns the commit downloaded.

    File by file, not with snapshot_download: that one returns a non-empty local folder as it is
    when the hub refuses the file listing (a gated repository), hiding the refusal."""
    from deskbench.requirements import Extra, check

    check("deskbench fetch from the Hugging Face hub", [Extra("huggingface_hub", "madqa")])
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.utils import disable_progress_bars, filter_repo_objects

    disable_progress_bars()  # the command draws its own progress
    url = endpoint()
    source = token_source()
    api = HfApi(endpoint=url)
    try:
        sha = api.dataset_info(repo_id).sha or "main"
        card = hf_hub_download(repo_id, "README.md", repo_type="dataset", revision=sha, local_dir=dest,
                               endpoint=url)
        names = api.list_repo_files(repo_id, repo_type="dataset", revision=sha)
        for name in filter_repo_objects(names, allow_patterns=patterns_for(Path(card))):
            hf_hub_download(repo_id, name, repo_type="dataset", revision=sha, local_dir=dest, endpoint=url)
    except Exception as exc:
        raise hub_error(exc, repo_id, shown_endpoint(), source) from exc
    return sha


def hub_error(exc: Exception, repo_id: str, url: str, source: str | None) -> Exception:
    """The hub's refusal as one line saying what to do; other errors pass through unchanged."""
    from huggingface_hub.utils import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    page = f"{url}/datasets/{repo_id}"
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    message = str(getattr(response, "headers", {}).get("X-Error-Message", "")) if response is not None else ""
    if isinstance(exc, UserError):
        return exc
    if status == 401 and "Invalid credentials" in message:
        return UserError(f"the Hugging Face hub refused the token from {source or 'your login'} as invalid; make a "
                         f"new one at {url}/settings/tokens, then {LOGIN}")
    if isinstance(exc, GatedRepoError) and status == 403:
        return UserError(f"{repo_id} is gated and the token from {source} has not been granted access: accept its "
                         f"terms at {page} (logged in as the token's user), then run this again")
    if isinstance(exc, GatedRepoError) or (isinstance(exc, RepositoryNotFoundError) and status == 401):
        if source is None:
            return UserError(f"{repo_id} is gated and no Hugging Face token was found: accept its terms at {page}, "
                             f"then {LOGIN}; or give a snapshot you downloaded with --from DIR")
        return UserError(f"the hub refused the token from {source} for {repo_id} (HTTP {status}): accept the "
                         f"terms at {page} as the token's user, or {LOGIN} with another token")
    if isinstance(exc, RepositoryNotFoundError):
        return UserError(f"{repo_id} is not found at {url} (HTTP {status}); check HF_ENDPOINT, or give a "
                         "snapshot with --from DIR")
    if isinstance(exc, OfflineModeIsEnabled) or (isinstance(exc, LocalEntryNotFoundError)
                                                  and os.environ.get("HF_HUB_OFFLINE")):
        return UserError(f"HF_HUB_OFFLINE is set, so {repo_id} cannot be downloaded; unset it, or give a snapshot "
                         "with --from DIR")
    if isinstance(exc, HfHubHTTPError | LocalEntryNotFoundError) or "httpx" in type(exc).__module__:
        from deskbench.redact import redact_text

        first = redact_text(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
        return UserError(f"cannot download {repo_id} from {url} ({first}); check the network and run this "
                         "again, or give a snapshot with --from DIR")
    return exc
