"""semtools' `search`, `parse` and `workspace` commands, as the semtools-agent's Bash runs them.

A reimplementation of run-llama/semtools 2.0.0 (the release with three separate commands that
MADQA's Prompt 8 CLAUDE.md documents; src/bin/{search,parse,workspace}.rs and src/search/mod.rs
at commit 8bfbebb) and of model2vec-rs 0.1.3 (the static-embedding encoder semtools links):

- `search QUERY [FILES]... [-n/--n-lines 3] [--top-k 3] [-m/--max-distance D] [-i/--ignore-case]`:
  every line of every file (or of stdin) embedded with a model2vec static model (semtools:
  minishlab/potion-multilingual-128M), lines up to 2048 tokens, the query up to 512; cosine
  distance (simsimd's: 0 for two zero vectors, 1 when the dot product is 0, else 1 - cos, floored
  at 0); results sorted by distance, stable (files in the order given, lines in order); without
  --max-distance the top-k, with it every line strictly under the threshold (top-k ignored).
  Output per result: `FILE:START::END (DISTANCE)` then the lines START..END numbered from 1 as
  `{:4}: line`, then an empty line. With $SEMTOOLS_WORKSPACE set and files given, line vectors
  are cached in the workspace (per path, size, mtime) and the workspace's ranking is used: lines
  at or under --max-distance, then the top-k in every case, and the header's END is not clipped
  to the file (as semtools' workspace mode prints it).
- `parse [-c CONFIG] [-b llama-parse] [-v] FILES...`: prints one Markdown path per input. Text
  files (txt, md, csv, json, ...) and missing paths are printed as given; a PDF's Markdown is
  written to ~/.parse/NAME.md, as semtools' cache does. LlamaParse (the paper's backend) is a
  paid service: here the Markdown is the corpus's own page text (deskbench's text layer / OCR),
  looked up by the PDF's sha256 in the manifest deskbench writes ($SEMTOOLS_PARSED), each page
  under a `<!-- page N -->` line. The backend name is checked as semtools checks it.
- `workspace use NAME | status | prune`: the workspace's config.json under
  ~/.semtools/workspaces/NAME and the messages semtools prints.

Standalone on purpose: it imports nothing from deskbench (only numpy and tokenizers, from the
`embeddings` extra), so the jail runs this one file with the venv's Python. The model's
safetensors file is memory-mapped (only the rows a text uses are read).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL = "minishlab/potion-multilingual-128M"  # semtools src/search/mod.rs MODEL_NAME
LINE_MAX_TOKENS = 2048  # create_document_from_content: encode_with_args(lines, Some(2048), 16384)
QUERY_MAX_TOKENS = 512  # encode_single -> encode: max_length 512
EMBEDDING_VERSION = 1  # the workspace cache's version (semtools' CURRENT_EMBEDDING_VERSION plays this part)
TEXT_EXTENSIONS = {"txt", "md", "rst", "org", "csv", "json", "xml", "yaml", "yml", "py", "js", "ts", "rs"}
PAGE_MARKER = "<!-- page {n} -->"
_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "I32": "<i4", "I64": "<i8"}


class CommandError(Exception):
    """What the command prints as `Error: ...` before exiting 1 (anyhow's shape)."""


# -- model2vec ---------------------------------------------------------------------------------


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as read-only memory maps (the format: an 8-byte little-
    endian header length, a JSON header of dtype/shape/data_offsets, then the data)."""
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    base = 8 + size
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise CommandError(f"unsupported tensor dtype: {info['dtype']} ({name} in {path})")
        start, end = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if end - start != count * np.dtype(dtype).itemsize:
            raise CommandError(f"{path}: tensor {name} has {end - start} bytes for shape {info['shape']}")
        array = np.memmap(path, dtype=dtype, mode="r", offset=base + start, shape=(count,)) if count else \
            np.zeros(0, dtype=dtype)
        out[name] = array.reshape(info["shape"])
    return out


@dataclass
class StaticModel:
    """model2vec-rs 0.1.3's StaticModel: a tokenizer, an embedding table (optionally with per-token
    weights and a token -> row mapping), mean pooling, L2 normalisation when config.json says so."""

    tokenizer: Any  # tokenizers.Tokenizer
    embeddings: np.ndarray
    weights: np.ndarray | None
    mapping: np.ndarray | None
    normalize: bool
    median_token_length: int
    unk_token_id: int

    @classmethod
    def load(cls, folder: Path) -> StaticModel:
        from tokenizers import Tokenizer

        missing = [n for n in ("config.json", "tokenizer.json", "model.safetensors") if not (folder / n).is_file()]
        if missing:
            raise CommandError(f"the static model folder {folder} has no {', '.join(missing)}")
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        lengths = sorted(len(t.encode("utf-8")) for t in tokenizer.get_vocab(with_added_tokens=False))
        median = lengths[len(lengths) // 2] if lengths else 1
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        normalize = config.get("normalize", True)
        spec = json.loads(tokenizer.to_str())
        unk = (spec.get("model") or {}).get("unk_token")
        unk_token = unk if isinstance(unk, str) else "[UNK]"
        unk_id = tokenizer.token_to_id(unk_token)
        if unk_id is None:
            raise CommandError(f"tokenizer claims unk_token='{unk_token}' but it isn't in the vocab")
        tensors = read_safetensors(folder / "model.safetensors")
        table = next((tensors[n] for n in ("embeddings", "0", "embedding.weight") if n in tensors), None)
        if table is None or table.ndim != 2:
            raise CommandError(f"embeddings tensor not found in {folder / 'model.safetensors'}")
        weights = tensors.get("weights")
        mapping = tensors.get("mapping")
        return cls(tokenizer=tokenizer, embeddings=table, normalize=bool(normalize) if isinstance(normalize, bool) else True,
                   weights=None if weights is None else np.asarray(weights, dtype=np.float32),
                   mapping=None if mapping is None else np.asarray(mapping).astype(np.int64),
                   median_token_length=median, unk_token_id=unk_id)

    @property
    def dims(self) -> int:
        return int(self.embeddings.shape[1])

    def encode(self, texts: list[str], max_tokens: int) -> np.ndarray:
        """One float32 vector per text: the text cut to max_tokens * the median token length in
        characters, tokenised without special tokens, unknown tokens dropped, at most max_tokens
        ids, their rows (times their weights) averaged (an empty text: the zero vector)."""
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        cut = max_tokens * self.median_token_length
        encodings = self.tokenizer.encode_batch_fast([t[:cut] for t in texts], add_special_tokens=False)
        for i, enc in enumerate(encodings):
            ids = [t for t in enc.ids if t != self.unk_token_id][:max_tokens]
            if not ids:
                continue
            index = np.asarray(ids, dtype=np.int64)
            rows = self.mapping[index] if self.mapping is not None else index
            vectors = np.asarray(self.embeddings[rows], dtype=np.float32)
            if self.weights is not None:
                vectors = vectors * self.weights[index][:, None]
            mean = vectors.sum(axis=0, dtype=np.float32) / np.float32(len(ids))
            if self.normalize:
                mean = mean / max(float(np.sqrt(np.dot(mean, mean))), 1e-12)
            out[i] = mean
        return out


def cosine_distances(query: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """simsimd's cosine distance of the query to each row (float64)."""
    q = query.astype(np.float64)
    m = lines.astype(np.float64)
    ab = m @ q
    a2 = float(q @ q)
    b2 = np.einsum("ij,ij->i", m, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = 1.0 - ab / np.sqrt(a2 * b2)
    d = np.where(ab == 0, 1.0, d)
    d = np.where((a2 == 0) & (b2 == 0), 0.0, d)
    return np.maximum(d, 0.0)


def show_distance(d: float) -> str:
    """A distance as Rust's `{}` prints an f64: shortest round-trip digits, never an exponent, no
    trailing `.0`."""
    return str(np.format_float_positional(d, trim="-"))


# -- search ---------------------------------------------------------------------------------------


@dataclass
class Result:
    filename: str
    start: int  # 0-based first context line
    end: int  # exclusive
    match: int  # 0-based matching line
    distance: float


def _lines(text: str) -> list[str]:
    """Rust's str::lines: split on \\n, a trailing \\r dropped, no final empty line."""
    if not text:
        return []
    parts = text.split("\n")
    if text.endswith("\n"):
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def rank(docs: list[tuple[str, list[str], np.ndarray]], query: np.ndarray, n_lines: int, top_k: int,
         max_distance: float | None) -> list[Result]:
    """search_documents: every line under the threshold (100.0 when none), stable sort by distance,
    then all of them with --max-distance, else the first top_k."""
    found: list[Result] = []
    threshold = 100.0 if max_distance is None else max_distance
    for name, lines, vectors in docs:
        if not lines:
            continue
        distances = cosine_distances(query, vectors)
        for idx, d in enumerate(distances.tolist()):
            if d < threshold:
                found.append(Result(name, max(0, idx - n_lines), min(len(lines), idx + n_lines + 1), idx, d))
    found.sort(key=lambda r: r.distance)
    return found if max_distance is not None else found[:top_k]


def print_results(results: list[Result], texts: dict[str, list[str]], out: Any) -> None:
    for r in results:
        out.write(f"{r.filename}:{r.start}::{r.end} ({show_distance(r.distance)})\n")
        lines = texts[r.filename]
        for i in range(r.start, min(r.end, len(lines))):
            out.write(f"{i + 1:4}: {lines[i]}\n")
        out.write("\n")


def model_folder() -> Path:
    folder = os.environ.get("SEMTOOLS_MODEL_DIR")
    if not folder:
        raise CommandError(f"no local copy of {DEFAULT_MODEL}: set SEMTOOLS_MODEL_DIR to a model2vec folder")
    return Path(folder)


def search(args: argparse.Namespace, stdin: Any, out: Any) -> int:
    model = StaticModel.load(model_folder())
    query = args.query.lower() if args.ignore_case else args.query
    qvec = model.encode([query], QUERY_MAX_TOKENS)[0]
    if not args.files and not stdin.isatty():
        lines = _lines(stdin.read())
        if lines:
            vectors = model.encode([s.lower() for s in lines] if args.ignore_case else lines, LINE_MAX_TOKENS)
            results = rank([("<stdin>", lines, vectors)], qvec, args.n_lines, args.top_k, args.max_distance)
            print_results(results, {"<stdin>": lines}, out)
            return 0
    if not args.files:
        sys.stderr.write("Error: No input provided. Either specify files as arguments or pipe input to stdin.\n")
        return 1
    if os.environ.get("SEMTOOLS_WORKSPACE"):
        return workspace_search(model, args, qvec, out)
    docs: list[tuple[str, list[str], np.ndarray]] = []
    texts: dict[str, list[str]] = {}
    for name in args.files:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{exc.strerror if isinstance(exc, OSError) else 'stream did not contain valid UTF-8'}"
                               f" ({name})") from exc
        lines = _lines(text)
        texts[name] = lines
        docs.append((name, lines, model.encode([s.lower() for s in lines] if args.ignore_case else lines,
                                               LINE_MAX_TOKENS)))
    print_results(rank(docs, qvec, args.n_lines, args.top_k, args.max_distance), texts, out)
    return 0


# -- workspace ------------------------------------------------------------------------------------


def workspace_root(name: str) -> Path:
    return Path.home() / ".semtools" / "workspaces" / name


def workspace_search(model: StaticModel, args: argparse.Namespace, qvec: np.ndarray, out: Any) -> int:
    """search_with_workspace: new or changed files (size, mtime, version) embedded and stored, then
    the stored lines of the given files ranked: those at or under --max-distance, top-k always.
    As in semtools the cache is keyed by path, not by --ignore-case."""
    root = workspace_root(os.environ["SEMTOOLS_WORKSPACE"])
    store = root / "lines"
    store.mkdir(parents=True, exist_ok=True)
    index_file = root / "documents.json"
    index: dict[str, dict[str, int]] = json.loads(index_file.read_text()) if index_file.is_file() else {}
    ranked: list[tuple[float, str, int]] = []
    changed = False
    for name in args.files:
        try:
            st = os.stat(name)
        except OSError:
            continue  # a file that does not exist is skipped, as semtools does
        meta = {"size": st.st_size, "mtime": int(st.st_mtime), "version": EMBEDDING_VERSION}
        cached = store / (hashlib.sha256(name.encode()).hexdigest() + ".npy")
        if index.get(name) != meta or not cached.is_file():
            lines = _lines(Path(name).read_text(encoding="utf-8"))
            vectors = model.encode([s.lower() for s in lines] if args.ignore_case else lines, LINE_MAX_TOKENS)
            np.save(cached, vectors)
            index[name] = meta
            changed = True
        vectors = np.load(cached)
        if len(vectors):
            for idx, d in enumerate(cosine_distances(qvec, vectors).tolist()):
                if args.max_distance is None or d <= args.max_distance:
                    ranked.append((d, name, idx))
    if changed:
        index_file.write_text(json.dumps(index, indent=2))
    ranked.sort(key=lambda r: r[0])
    for d, name, idx in ranked[: args.top_k]:
        start, end = max(0, idx - args.n_lines), idx + args.n_lines + 1
        out.write(f"{name}:{start}::{end} ({show_distance(d)})\n")
        try:
            lines = _lines(Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            out.write("    [Error: Could not read file content]\n\n")
            continue
        for i in range(start, min(end, len(lines))):
            out.write(f"{i + 1:4}: {lines[i]}\n")
        out.write("\n")
    return 0


def workspace(args: argparse.Namespace, out: Any) -> int:
    if args.command == "use":
        root = workspace_root(args.name)
        root.mkdir(parents=True, exist_ok=True)
        config = {"name": args.name, "root_dir": str(root), "in_batch_size": 5000, "oversample_factor": 3}
        (root / "config.json").write_text(json.dumps(config, indent=2))
        out.write(f"Workspace '{args.name}' configured.\nTo activate it, run:\n"
                  f"  export SEMTOOLS_WORKSPACE={args.name}\n\n"
                  "Or add this to your shell profile (.bashrc, .zshrc, etc.)\n")
        return 0
    name = os.environ.get("SEMTOOLS_WORKSPACE", "")
    if not name:
        raise CommandError("No active workspace\n\nCaused by:\n    No active workspace. Run: workspace use <name>")
    root = workspace_root(name)
    index_file = root / "documents.json"
    index: dict[str, Any] = json.loads(index_file.read_text()) if index_file.is_file() else {}
    if args.command == "status":
        out.write(f"Active workspace: {name}\nRoot: {root}\nDocuments: {len(index)}\nIndex: No\n")
        return 0
    missing = [p for p in index if not Path(p).exists()]
    if not missing:
        out.write("No stale documents found. Workspace is clean.\n")
        return 0
    out.write(f"Found {len(missing)} stale documents:\n" + "".join(f"  - {p}\n" for p in missing))
    for p in missing:
        index.pop(p)
        (root / "lines" / (hashlib.sha256(p.encode()).hexdigest() + ".npy")).unlink(missing_ok=True)
    index_file.write_text(json.dumps(index, indent=2))
    out.write(f"Removed {len(missing)} stale documents from workspace.\n")
    return 0


# -- parse ----------------------------------------------------------------------------------------


def page_markdown(pages: list[str]) -> str:
    """A document's Markdown as the fallback backend writes it: each page under its marker, pages
    joined by blank lines (semtools joins LlamaParse's pages with "\\n\\n")."""
    return "".join(f"{PAGE_MARKER.format(n=n)}\n{text}\n\n" for n, text in enumerate(pages, start=1))


def parse(args: argparse.Namespace, out: Any) -> int:
    for name in args.files:
        if not Path(name).exists():
            sys.stderr.write(f"Warning: File does not exist: {name}\n")
    if args.backend != "llama-parse":
        sys.stderr.write(f"Error: Unknown backend '{args.backend}'. Supported backends: llama-parse\n")
        return 1
    manifest_file = os.environ.get("SEMTOOLS_PARSED", "")
    manifest: dict[str, str] = json.loads(Path(manifest_file).read_text()) if manifest_file else {}
    cache = Path.home() / ".parse"
    cache.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in args.files:
        path = Path(name)
        if not path.exists() or path.suffix.lower().lstrip(".") in TEXT_EXTENSIONS:
            if args.verbose:
                sys.stderr.write(f"Skipping readable file: {name}\n")
            out.write(f"{name}\n")
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        source = manifest.get(digest)
        if source is None:
            sys.stderr.write(f"Error: {name}: no parsed text for this file (the parse backend here only knows "
                             "the corpus's documents)\n")
            status = 1
            continue
        target = cache / f"{path.name}.md"
        shutil.copyfile(source, target)
        out.write(f"{target}\n")
    return status


# -- the command line -------------------------------------------------------------------------------


def parser(command: str) -> argparse.ArgumentParser:
    if command == "search":
        p = argparse.ArgumentParser(prog="search", description="A CLI tool for fast semantic keyword search")
        p.add_argument("query", help="Query to search for (positional argument)")
        p.add_argument("files", nargs="*", help="Files to search, optional if using stdin")
        p.add_argument("-n", "--n-lines", "--context", dest="n_lines", type=int, default=3,
                       help="How many lines before/after to return as context [default: 3]")
        p.add_argument("--top-k", dest="top_k", type=int, default=3,
                       help="The top-k files or texts to return (ignored if max_distance is set) [default: 3]")
        p.add_argument("-m", "--max-distance", "--threshold", dest="max_distance", type=float, default=None,
                       help="Return all results with distance below this threshold (0.0+)")
        p.add_argument("-i", "--ignore-case", action="store_true", help="Perform case-insensitive search")
        return p
    if command == "parse":
        p = argparse.ArgumentParser(prog="parse", description="A CLI tool for parsing documents using various backends")
        p.add_argument("-c", "--config", "--parse-config", dest="config", default=None,
                       help="Path to the config file. Defaults to ~/.semtools_config.json")
        p.add_argument("-b", "--backend", default="llama-parse",
                       help="The backend type to use for parsing. Defaults to `llama-parse`")
        p.add_argument("-v", "--verbose", action="store_true", help="Verbose output while parsing")
        p.add_argument("files", nargs="+", help="Files to parse")
        return p
    p = argparse.ArgumentParser(prog="workspace", description="Manage semtools workspaces")
    sub = p.add_subparsers(dest="command", required=True)
    use = sub.add_parser("use", help="Use or create a workspace (prints export command to run)")
    use.add_argument("name")
    sub.add_parser("status", help="Show active workspace and basic stats")
    sub.add_parser("prune", help="Remove stale or missing files from store")
    return p


def main(argv: list[str], stdin: Any = None, out: Any = None) -> int:
    """`cli.py search|parse|workspace ARGS...`; the exit status."""
    stdin = stdin if stdin is not None else sys.stdin
    out = out if out is not None else sys.stdout
    if not argv or argv[0] not in ("search", "parse", "workspace"):
        sys.stderr.write("usage: cli.py search|parse|workspace ...\n")
        return 2
    command, rest = argv[0], argv[1:]
    args = parser(command).parse_args(rest)
    try:
        if command == "search":
            return search(args, stdin, out)
        if command == "parse":
            return parse(args, out)
        return workspace(args, out)
    except CommandError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
