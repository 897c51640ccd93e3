"""The core knows no track, and no module imports itself back (issue 34's guard rail).

Read with `ast` over src/deskbench, every import counts: module level, inside a function, under
TYPE_CHECKING (each couples the code as much as the others). A module outside deskbench/tracks/
that imports deskbench.tracks.<anything> is a core->track import; a strongly connected component
of the import graph with more than one module is a cycle (Tarjan). The same reading as the
project's layering checker (../shared/tools/layering.py), so the two agree on every count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "deskbench"
TRACKS = f"{PACKAGE}.tracks"
# core->track import lines still there; lowered as the tracks' code leaves the core (0 at the end)
MAX_CORE_TO_TRACK = 0


def modules(src: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package is its __init__)."""
    found: dict[str, Path] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every name an import in `module` reaches, relative ones resolved;
    `from a import b` reaches both a.b (b may be a module) and a."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names] + [(node.lineno, base)]
    return out


def graph(src: Path) -> tuple[dict[str, set[str]], list[str]]:
    """The import graph between the package's modules, and each core->track import line."""
    mods = modules(src)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    core_to_track: set[str] = set()
    for module, path in mods.items():
        for line, name in imported(module, path):
            if not (name == PACKAGE or name.startswith(f"{PACKAGE}.")):
                continue
            target = resolve(name)
            if target is None or target == module:
                continue
            edges[module].add(target)
            if not module.startswith(TRACKS) and target.startswith(f"{TRACKS}."):
                core_to_track.add(f"{path.relative_to(src)}:{line} imports {target}")
    return edges, sorted(core_to_track)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, todo = work[-1]
            if todo:
                w = todo.pop()
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, sorted(edges[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def cycle_path(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through a cycle's first module (breadth-first, inside the component), so
    the failure says which imports to cut."""
    inside = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v] & inside):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return component


@pytest.fixture(scope="module")
def package_graph() -> tuple[dict[str, set[str]], list[str]]:
    return graph(SRC)


def test_no_import_cycle(package_graph: tuple[dict[str, set[str]], list[str]]) -> None:
    edges, _ = package_graph
    found = cycles(edges)
    shown = "\n".join(f"cycle of {len(c)}: {' -> '.join(cycle_path(edges, c))}" for c in found)
    assert not found, f"{len(found)} import cycle(s); cut one import of each:\n{shown}"


def test_the_core_imports_no_more_of_the_tracks(package_graph: tuple[dict[str, set[str]], list[str]]) -> None:
    _, core_to_track = package_graph
    assert len(core_to_track) <= MAX_CORE_TO_TRACK, (
        f"{len(core_to_track)} core->track import lines (at most {MAX_CORE_TO_TRACK}): a track's code belongs in "
        "its folder, reached through a Track hook (contract/track.py):\n" + "\n".join(core_to_track))


def test_the_reading_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The analysis itself: a cycle through a function-level and a TYPE_CHECKING import, a
    relative import, and a core module importing a track, in a package of five files."""
    pkg = tmp_path / PACKAGE
    for folder in (pkg, pkg / "runs", pkg / "tracks", pkg / "tracks" / "one"):
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (pkg / "runs" / "store.py").write_text("def f():\n    from deskbench.runs import outcomes\n")
    (pkg / "runs" / "outcomes.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from .track import T\n")
    (pkg / "runs" / "track.py").write_text("import deskbench.runs.store\nfrom deskbench.tracks.one import run\n")
    (pkg / "tracks" / "one" / "run.py").write_text("from deskbench import runs\n")
    edges, core_to_track = graph(tmp_path)
    assert cycles(edges) == [["deskbench.runs.outcomes", "deskbench.runs.store", "deskbench.runs.track"]]
    assert cycle_path(edges, cycles(edges)[0]) == ["deskbench.runs.outcomes", "deskbench.runs.track",
                                                   "deskbench.runs.store", "deskbench.runs.outcomes"]
    where = Path("deskbench/runs/track.py")
    assert core_to_track == [f"{where}:2 imports deskbench.tracks.one", f"{where}:2 imports deskbench.tracks.one.run"]
    (pkg / "runs" / "store.py").write_text("")
    assert cycles(graph(tmp_path)[0]) == []
