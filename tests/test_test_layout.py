"""The tests are laid out as the source is (docs/development.md): a folder of tests names a folder
of the package, and test file names stay unique (the folders have no `__init__.py`, so pytest
imports each test file by its bare name: two of one name would collide at collection)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "src" / "deskbench"
NOT_TESTS = {"data", "echo_track", "__pycache__"}  # fixtures, the plugin test track, caches
# What checks the product from a user's side stays at the top (the README's promises, plugins,
# the layering rail, the test command itself).
TOP_LEVEL = ("test_first_hour_", "test_plugins", "test_layering", "test_test_command", "test_test_layout")


def _test_folders() -> list[Path]:
    return sorted(p.parent for p in TESTS.rglob("test_*.py")
                  if p.parent != TESTS and not NOT_TESTS & set(p.relative_to(TESTS).parts))


def test_every_test_folder_names_a_folder_of_the_package() -> None:
    folders = {f.relative_to(TESTS) for f in _test_folders()}
    assert folders, "no test folders: the layout check found nothing to check"
    missing = sorted(str(f) for f in folders if not (PACKAGE / f).is_dir())
    assert not missing, f"test folders with no package folder of that name: {missing}"


def test_only_whole_product_tests_stay_at_the_top() -> None:
    stray = sorted(p.name for p in TESTS.glob("test_*.py") if not p.name.startswith(TOP_LEVEL))
    assert not stray, f"move these next to the code they test (tests/<area>/ or tests/tracks/<name>/): {stray}"


def test_test_file_names_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if not NOT_TESTS & set(p.relative_to(TESTS).parts))
    assert sum(names.values()) > 100
    assert [n for n, c in names.items() if c > 1] == []
