"""Run identity: a run keeps, per system, its configuration (agent settings, model settings, a
hash of the prompts) and the deskbench that ran it; a resume under another configuration, or over
tasks edited under the same ids, is refused with one line; new tasks are added and run."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli
from fake_openai import FakeOpenAI

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.runs.identity import (
    SystemConfig,
    git_sha,
    prompt_hash,
    remember_config,
    stored_identities,
)
from deskbench.runs.store import RunStore, deskbench_version, task_hash
from deskbench.runs.track import execute_run, ready
from deskbench.tracks.docqa.run import RunSpec, prepare
from deskbench.tracks.docqa.tasks import DocQATask

SYSTEM = "bm25-agent:openai/gpt-4.1"
TASKS = [DocQATask(id="q1", question="Which vehicle rental rates are given for the winter season?",
                   answer_variants=[["Mountain car"]], evidence=[{"document": "alpha.pdf", "page": 1}]),  # type: ignore[list-item]
         DocQATask(id="q2", question="What do cars parked overnight pay?", answer_variants=[["a fee"]],
                   evidence=[{"document": "alpha.pdf", "page": 2}])]  # type: ignore[list-item]


def _answer(body: dict[str, Any], n: int) -> dict[str, Any]:
    args = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}
    return {"kind": "tool", "name": "provide_answer", "arguments": json.dumps(args)}


def _spec(corpus: Corpus, out: Path, **changes: Any) -> RunSpec:
    return RunSpec(**{"agent": "bm25-agent", "model": "openai/gpt-4.1", "out": out, "corpus": corpus.root,
                      "concurrency": 1, "preset": "paper", **changes})  # the Prompt 5 loop the replies are for


def test_a_resume_with_another_setting_is_refused_naming_it(operator_corpus: Corpus, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    with FakeOpenAI(script=_answer) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        first = execute_run(prepare(_spec(operator_corpus, out), TASKS))
        assert first[0].counts.done == 2
        for changes, differs in (({"view": "text"}, "view: image -> text"),
                                 ({"max_steps": 5}, "max_steps: 10 -> 5"),
                                 ({"top_k": 3, "view": "text"}, "top_k: 5 -> 3, view: image -> text")):
            with pytest.raises(UserError) as refused:
                ready(prepare(_spec(operator_corpus, out, **changes), TASKS))  # the runner records the identity
            line = str(refused.value)
            assert "\n" not in line and differs in line and "a new --out" in line and SYSTEM in line
        sent = len(fake.requests)
        # --concurrency, --limit and --attempts are not configuration: a resume may change them;
        # the explicit --max-steps 10 is the agent's own default, the same configuration
        again = ready(prepare(_spec(operator_corpus, out, concurrency=4, attempts=2, max_steps=10), TASKS[:1]))
        assert again.already_done == 1
        assert execute_run(again)[0].counts.done == 1 and len(fake.requests) == sent + 1
    config = stored_identities(RunStore(out, create=False))[SYSTEM].config
    assert config.settings["view"] == "image" and config.settings["max_steps"] == 10 and config.settings["dpi"] == 200
    assert config.model == "openai/gpt-4.1" and config.model_settings is not None
    assert config.prompt_hash == prompt_hash("deskbench.tracks.docqa.agents.prompts", "deskbench.tracks.docqa.agents.bm25")


def test_a_changed_prompt_is_another_configuration(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    config = SystemConfig(track="echo", agent="a", settings={"x": 1}, prompt_hash="0" * 64)
    assert remember_config(store, "a", config) is None
    assert remember_config(store, "a", config) is None  # the same: resumed
    with pytest.raises(UserError, match=r"prompts: 000000000000 -> 111111111111 \(the agent's prompt"):
        remember_config(store, "a", config.model_copy(update={"prompt_hash": "1" * 64}))
    # a setting only one side knows (an older or newer deskbench) is no difference
    assert remember_config(store, "a", config.model_copy(update={"settings": {"x": 1, "new": True}})) is None


def _write_tasks(path: Path, tasks: list[DocQATask]) -> Path:
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return path


def _run(tasks: Path, out: Path, corpus: Corpus, *more: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", "--agent", "lexical", "--tasks", str(tasks), "--out", str(out), "--corpus", str(corpus.root),
                   "--quiet", "--json", *more)


def test_edited_tasks_are_refused_and_new_tasks_are_run(operator_corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _run(_write_tasks(tmp_path / "tasks.jsonl", TASKS), out, operator_corpus)
    assert first.returncode == 0, first.stderr
    store = RunStore(out, create=False)
    hashes = store.task_hashes()
    assert set(hashes) == {"q1", "q2"}
    assert set(store.episode_task_hashes().values()) == set(hashes.values())  # each episode keeps its task's hash
    # a question edited under the same id: one line naming it, nothing run, nothing changed
    edited = [TASKS[0], TASKS[1].model_copy(update={"question": "What do vans parked overnight pay?"})]
    refused = _run(_write_tasks(tmp_path / "edited.jsonl", edited), out, operator_corpus)
    line = refused.stderr.strip()
    assert refused.returncode == 2 and "\n" not in line, refused.stderr
    assert "q2" in line and "q1" not in line and "new --out" in line
    assert RunStore(out, create=False).task_hashes() == hashes
    # new ids are added to the run and run; ids missing from the new file are not run
    q3 = DocQATask(id="q3", question="Which engine specifications are on file?", answer_variants=[["engine"]])
    more = _run(_write_tasks(tmp_path / "more.jsonl", [TASKS[1], q3]), out, operator_corpus)
    assert more.returncode == 0, more.stderr
    assert "1 episodes run (0 errors), 1 already done" in more.stderr
    store = RunStore(out, create=False)
    assert [t.id for t in store.tasks_of(DocQATask)] == ["q1", "q2", "q3"]
    assert sorted(e.task_id for e in store.episodes()) == ["q1", "q2", "q3"]
    assert store.episode_task_hashes()[("q3", "lexical", 0)] == task_hash(q3.model_dump_json())
    # another setting on the no-model agent is refused too, on the command line: exit 2, one line
    other = _run(tmp_path / "more.jsonl", out, operator_corpus, "--top-k", "3")
    assert other.returncode == 2 and "top_k: 5 -> 3" in other.stderr and len(other.stderr.strip().splitlines()) == 1


def test_a_run_file_from_before_task_hashes_is_migrated(tmp_path: Path) -> None:
    run = tmp_path / "old"
    run.mkdir()
    con = sqlite3.connect(run / "run.sqlite")
    con.execute("CREATE TABLE episodes (task_id TEXT NOT NULL, system TEXT NOT NULL, attempt INTEGER NOT NULL, "
                "status TEXT NOT NULL, error TEXT, submission TEXT, trajectory TEXT NOT NULL, usage TEXT NOT NULL, "
                "started_at TEXT NOT NULL, finished_at TEXT NOT NULL, PRIMARY KEY (task_id, system, attempt))")
    con.execute("INSERT INTO episodes VALUES ('q1', 'lexical', 0, 'ok', NULL, NULL, '[]', '{}', 'a', 'b')")
    con.commit()
    con.close()
    store = RunStore(run)
    assert store.episode_task_hashes() == {("q1", "lexical", 0): None}
    assert len(store.episodes()) == 1
    RunStore(run)  # opened again: the column is there, nothing to do


def _head() -> str | None:
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return sha or None


def _was_head_during_the_run(sha: str | None, before: str | None) -> None:
    """`sha` is the checkout's HEAD at some moment of the run: HEAD before it, HEAD after it, or a
    commit between them (others may commit to this checkout while the suite runs, so HEAD read
    after the run need not be the one the run read)."""
    if before is None:  # not a git checkout
        assert sha is None
        return
    assert sha is not None and len(sha) == 40, sha
    after = _head()

    def ancestor(a: str, b: str | None) -> bool:
        return subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", a, str(b)],
                              capture_output=True).returncode == 0

    assert ancestor(before, sha) and ancestor(sha, after), (before, sha, after)


def test_the_build_is_recorded_and_info_shows_the_run(operator_corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "run"
    tasks = _write_tasks(tmp_path / "tasks.jsonl", TASKS)
    git_sha.cache_clear()  # in-process CLI: read during this run, not when an earlier test ran
    before = _head()
    assert _run(tasks, out, operator_corpus, "--max-steps", "4").returncode == 0
    identity = stored_identities(RunStore(out, create=False))["lexical"]
    assert identity.first is not None and identity.first.deskbench == deskbench_version() is not None
    sha = identity.first.git_sha
    _was_head_during_the_run(sha, before)  # this checkout's commit
    assert identity.config.prompt_hash is None and identity.config.settings["max_steps"] == 4
    # another deskbench resuming the system: recorded as its latest, warned about once, not refused
    store = RunStore(out, create=False)
    table = store.meta("systems")
    assert isinstance(table, dict)
    table["lexical"]["latest"]["deskbench"] = "0.0.1"
    store.set_meta("systems", table)
    resumed = _run(tasks, out, operator_corpus, "--max-steps", "4")
    assert resumed.returncode == 0 and resumed.stderr.count("was last run with deskbench 0.0.1") == 1
    identity = stored_identities(RunStore(out, create=False))["lexical"]
    assert identity.latest.deskbench == deskbench_version() and identity.first is not None
    # info RUNDIR: the track, the tasks and per system its build, configuration and episodes
    shown = run_cli("info", str(out))
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "docqa track, 2 tasks" in text and "lexical: 2 episodes" in text
    assert f"first run with deskbench {deskbench_version()}" in text and "max_steps=4" in text and "view=image" in text
    data = json.loads(run_cli("info", str(out), "--json").stdout)
    assert data["track"] == "docqa" and data["tasks"] == 2
    assert data["systems"]["lexical"]["episodes"] == 2 and data["systems"]["lexical"]["config"]["agent"] == "lexical"
    assert data["systems"]["lexical"]["first"]["git_sha"] == sha
    neither = run_cli("info")
    assert neither.returncode == 2 and "--corpus" in neither.stderr
    assert run_cli("info", "--corpus", str(operator_corpus.root), "--json").returncode == 0  # a corpus, as before
