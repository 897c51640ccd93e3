"""The deliverables agent's prompt is the paper's (§3.2: corpus-discipline line + SME prompt) plus
the harness's mechanics: no word of any trap kind unless --trap-hints asks for the hints."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from deskbench.generate.demo import bundled_dir
from deskbench.tracks.deliverables.agent import deliverable_prompt, protocol_notes, variant_name
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions
from deskbench.tracks.deliverables.generate.packages import generate_deliverables
from deskbench.tracks.deliverables.prompts import TRAP_HINTS
from deskbench.tracks.deliverables.tasks import DeliverableTask, TrapKind, load_packages
from deskbench.tracks.deliverables.web_access import WebChoice

# Key words of each trap kind of the taxonomy (tasks/deliverables.TrapKind), any of which in the
# harness's own wording would tell the agent what to look for. "other" has no wording.
TRAP_WORDS: dict[str, tuple[str, ...]] = {
    "footnote_override": ("footnote", "override"),
    "unit_mismatch": ("unit",),
    "stale_placeholder": ("stale", "placeholder"),
    "unweighted_average": ("weight", "average"),
    "date_format": ("date",),
    "misnamed_item": ("misnamed",),
    "default_assumption": ("assumption",),
}
GENERAL = ("trap", "check every figure")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[DeliverableTask]:
    """The bundled packages and freshly generated ones: every trap kind the generators use."""
    out = tmp_path_factory.mktemp("gen")
    generate_deliverables(out, tasks=10, seed=3)
    return load_packages(bundled_dir() / "deliverables") + load_packages(out)


def test_the_word_list_covers_the_taxonomy_and_the_generators(tasks: list[DeliverableTask]) -> None:
    assert set(TRAP_WORDS) == set(get_args(TrapKind)) - {"other"}
    used = {trap.kind for t in tasks for trap in t.traps}
    assert used and used <= set(TRAP_WORDS), used - set(TRAP_WORDS)
    assert set(TRAP_HINTS) == set(TRAP_WORDS)  # --trap-hints has a hint for every kind


def harness_words(task: DeliverableTask, **flags: bool) -> str:
    """The prompt without the task's own text (discipline line + SME prompt, which are the
    paper's and may well say 'assumptions', and the file lines naming the task's files),
    lower-case."""
    prompt = deliverable_prompt(task, task.input_paths(), max_rounds=7, inline_chars=0, **flags)
    assert task.full_prompt in prompt
    assert prompt.index(task.full_prompt) < 40  # the task comes first, not after a preamble
    lines = prompt.replace(task.full_prompt, "").splitlines()
    return "\n".join(line for line in lines if not line.startswith("- /mnt/")).lower()


def says(words: str, key: str) -> bool:
    """`key` begins a word of `words` ('unit' in 'units', not 'date' in 'update')."""
    return re.search(rf"\b{re.escape(key)}", words) is not None


def test_default_prompt_names_no_trap(tasks: list[DeliverableTask]) -> None:
    for task in tasks:
        words = harness_words(task)
        for kind, keys in TRAP_WORDS.items():
            for key in keys:
                assert not says(words, key), f"{task.id}: {key!r} ({kind}) in the default prompt"
        for key in GENERAL:
            assert not says(words, key)
        assert "execute_code" in words and "/mnt/result/" in words and "at most 7 calls" in words
        assert "web_search" not in words


def test_trap_hints_bring_every_kind_back(tasks: list[DeliverableTask]) -> None:
    task = tasks[0]
    words = deliverable_prompt(task, task.input_paths(), max_rounds=7, inline_chars=0, trap_hints=True).lower()
    for kind, keys in TRAP_WORDS.items():
        assert any(says(words, k) for k in keys), kind
    assert words.index("traps") < words.index(task.full_prompt.lower())


def test_web_prompt_describes_the_tools_and_one_budget(tasks: list[DeliverableTask]) -> None:
    words = harness_words(tasks[0], web=True)
    assert "web_search" in words and "fetch" in words
    assert "at most 7 tool calls in all" in words


def test_variant_names_and_protocol_notes(tmp_path: Path) -> None:
    plain = DeliverableOptions()
    assert variant_name("deliverable-agent", plain) == "deliverable-agent"
    notes = {n.aspect: n for n in protocol_notes(plain)}
    assert notes["agent prompt"].source == "paper" and "§3.2" in notes["agent prompt"].detail
    assert notes["web access"].source == "deskbench" and "no --web" in notes["web access"].detail

    hinted = DeliverableOptions(trap_hints=True, web=WebChoice("recorded", str(tmp_path)))
    assert variant_name("deliverable-agent", hinted) == "deliverable-agent[trap-hints,web-recorded]"
    notes = {n.aspect: n for n in protocol_notes(hinted)}
    assert notes["agent prompt"].source == "deskbench" and "--trap-hints" in notes["agent prompt"].detail
    assert notes["web access"].source == "deskbench" and "recorded" in notes["web access"].detail

    live = {n.aspect: n for n in protocol_notes(DeliverableOptions(web=WebChoice("brave")))}
    assert live["web access"].source == "paper" and "--web brave" in live["web access"].detail
