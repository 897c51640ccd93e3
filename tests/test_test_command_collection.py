"""Collecting the tests imports no torch, transformers, sentence_transformers or safetensors.torch
(tests/conftest.py refuses it): each of the test command's xdist workers collects every test file,
so a module-level import of those costs every worker about 9 s of CPU before any test runs.

The end-to-end checks run pytest in a subprocess with tests/conftest.py loaded as a plugin over a
test file written to a temp folder; the heavy module is faked (a bare module put in sys.modules)
so the check itself stays quick."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import HEAVY_MODULES, heavy_import_problem

TESTS = Path(__file__).resolve().parent


def pytest_in(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", *options,
                           "-q", "--rootdir", str(folder), str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def collect(folder: Path) -> subprocess.CompletedProcess[str]:
    return pytest_in(folder, "-p", "no:xdist", "--collect-only")


def write_heavy_and_light(folder: Path) -> None:
    (folder / "test_light.py").write_text("def test_light() -> None:\n    pass\n")
    (folder / "test_heavy.py").write_text(
        "import sys\nimport types\n\nsys.modules.setdefault('transformers', types.ModuleType('transformers'))\n\n\n"
        "def test_heavy() -> None:\n    pass\n")


def test_a_test_file_importing_a_heavy_module_at_module_level_is_refused_naming_both(tmp_path: Path) -> None:
    write_heavy_and_light(tmp_path)
    done = collect(tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    lines = [line for line in done.stderr.splitlines() if "collecting the tests imported" in line]
    assert len(lines) == 1, done.stderr
    assert "imported transformers (first after collecting test_heavy.py)" in lines[0]
    assert "inside the tests or fixtures that use it" in lines[0]


def test_an_xdist_worker_reports_it_as_the_files_collection_error(tmp_path: Path) -> None:
    write_heavy_and_light(tmp_path)
    done = pytest_in(tmp_path, "-n", "1", "--dist", "loadfile")
    assert done.returncode == 1, done.stdout + done.stderr  # not an INTERNALERROR (3) with the line lost
    assert "ERROR collecting test_heavy.py" in done.stdout
    assert "collecting the tests imported transformers (first after collecting test_heavy.py)" in done.stdout
    assert ", 1 error in " in done.stdout.splitlines()[-1]  # the run fails on it


def test_the_same_files_collect_when_the_import_is_inside_the_test(tmp_path: Path) -> None:
    (tmp_path / "test_heavy.py").write_text(
        "def test_heavy() -> None:\n    import sys\n    import types\n\n"
        "    sys.modules.setdefault('transformers', types.ModuleType('transformers'))\n")
    done = collect(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 test collected" in done.stdout


def test_only_modules_loaded_after_the_session_began_count() -> None:
    assert heavy_import_problem({"os", "numpy"}, set(), {}) is None
    assert heavy_import_problem({"torch", "numpy"}, {"torch"}, {}) is None  # a plugin's doing, not collection's
    problem = heavy_import_problem({"torch", "safetensors.torch"}, set(), {"torch": "tests/x/test_a.py"})
    assert problem is not None and problem.startswith("collecting the tests imported torch, safetensors.torch "
                                                      "(first after collecting tests/x/test_a.py)")
    assert "\n" not in problem
    assert HEAVY_MODULES == ("torch", "transformers", "sentence_transformers", "safetensors.torch")
