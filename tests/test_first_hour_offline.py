"""Issue 31, item 4: an offline path that scores. The scripted model (`--model scripted:FILE`,
models/scripted.py) answers any agent from a file keyed by question; the example plugin reaches a
real score with it; the demo stores its scorings and ends with the command that does that, which
runs as printed."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, require_tool, run_cli

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.models.registry import open_model, parse_spec, preflight
from deskbench.models.scripted import ScriptedChat, read_script
from deskbench.models.types import ChatRequest, Message, ModelError
from deskbench.runs.store import RunStore
from deskbench.tracks.docqa.tasks import DocQATask

EXAMPLE = REPO / "examples" / "custom_agent"
DEMO_ANSWERS = EXAMPLE / "demo_answers.jsonl"
WINTER = "Which vehicle rental rates are given for the winter season?"
TASK = DocQATask(id="q1", question=WINTER, answer_variants=[["Mountain car"]],
                 evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
ANSWER = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}


def _write(path: Path, *entries: object) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries), encoding="utf-8")
    return path


def _chat(path: Path) -> ScriptedChat:
    return ScriptedChat(read_script(path), path.stem)


def _ask(model: ScriptedChat, *messages: Message) -> Message:
    return asyncio.run(model.complete(ChatRequest(messages=list(messages)))).message


def _user(text: str) -> Message:
    return Message(role="user", content=text)


# -- the model -------------------------------------------------------------------------------------


def test_a_request_gets_the_entry_whose_question_it_holds(tmp_path: Path) -> None:
    model = _chat(_write(tmp_path / "s.jsonl",
                         "# a comment line", "",
                         {"question": "What is the fee?", "content": "ten"},
                         {"question": "What is the fee for cars?", "content": ANSWER},
                         {"question": "Who signed?", "tool_calls": [{"name": "provide_answer", "arguments": ANSWER}]}))
    # inside a prompt, with another case and other white space: normalised; the longest question wins
    prompt = "Answer from these pages.\n\n[alpha.pdf page 1]\ntext\n\nQuestion: what is the FEE   for\ncars?"
    reply = _ask(model, Message(role="system", content="be brief"), _user(prompt))
    assert json.loads(reply.text()) == ANSWER and not reply.tool_calls  # an object is sent as its JSON text
    assert _ask(model, _user("What is the fee?")).text() == "ten"
    (call,) = _ask(model, _user("Who signed?")).tool_calls
    assert call.name == "provide_answer" and call.parsed() == ANSWER
    response = asyncio.run(model.complete(ChatRequest(messages=[_user("Who signed?")])))
    assert response.model == "scripted/s" and response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.cost_usd) == (0, 0, 0.0)


def test_turns_come_in_order_and_one_past_the_last_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "loop.jsonl", {"question": WINTER, "turns": [
        {"tool_calls": [{"name": "search_documents", "arguments": {"query": "winter rates"}}]},
        {"content": "done", "tool_calls": [{"name": "provide_answer", "arguments": ANSWER}]}]})
    model = _chat(path)
    first = _ask(model, _user(WINTER))
    assert [(c.name, c.parsed()) for c in first.tool_calls] == [("search_documents", {"query": "winter rates"})]
    tool = Message(role="tool", tool_call_id=first.tool_calls[0].id, content="results")
    second = _ask(model, _user(WINTER), first, tool)
    assert second.text() == "done" and second.tool_calls[0].name == "provide_answer"
    with pytest.raises(ModelError) as exc:
        _ask(model, _user(WINTER), first, tool, second, _user("again"))
    assert f"{path} line 1 has 2 turn(s)" in str(exc.value) and "turn 3" in str(exc.value)
    assert not exc.value.retryable


def test_an_unmatched_question_is_an_error_naming_it_and_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", {"question": WINTER, "content": "x"})
    with pytest.raises(ModelError) as exc:
        _ask(_chat(path), _user("Pages: ...\nQuestion: Who is the harbour master?\nReply with JSON."))
    message = str(exc.value)
    assert "Who is the harbour master?" in message and str(path) in message and not exc.value.retryable


def test_model_strings(tmp_path: Path) -> None:
    for spec in ("scripted:path/to/answers.v2.jsonl", "scripted/path/to/answers.v2.jsonl"):
        m = parse_spec(spec)
        assert (m.provider, m.name, m.path, m.id) == ("scripted", "answers.v2", "path/to/answers.v2.jsonl",
                                                       "scripted/answers.v2")
    with pytest.raises(UserError, match="needs a file"):
        parse_spec("scripted:")
    # the plugin form package.module:factory/MODEL is still the plugin's
    plugin = parse_spec("scripted_provider:scripted/demo")
    assert (plugin.provider, plugin.name, plugin.path) == ("scripted_provider:scripted", "demo", None)


def test_calls_cost_a_known_zero_whatever_the_file_is_called(tmp_path: Path) -> None:
    path = _write(tmp_path / "gpt-5.jsonl", {"question": WINTER, "content": "x"})  # a priced model's name
    model = open_model(f"scripted:{path}", cache=True)  # a cache would keep an old file's replies: none

    async def go():  # -> ChatResponse
        try:
            return await model.complete(ChatRequest(messages=[_user(WINTER)]))
        finally:
            await model.aclose()

    usage = asyncio.run(go()).usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.cost_usd) == (1, 0, 0, 0.0)
    assert model.cache is None and model.id == "scripted/gpt-5"


@pytest.mark.parametrize(("lines", "says"), [
    (None, "not found"),
    (["not json"], "line 1:"),
    (["", '{"question": "Q?"}'], "line 2: no reply"),
    (['{"question": "Q?", "content": "a", "turns": [{"content": "b"}]}'], "not both"),
    (['{"question": "Q?", "answer": "a"}'], "line 1: answer: Extra inputs"),
    (['{"question": "Q?", "content": "a"}', '{"question": " q? ", "content": "b"}'], "already on line 1"),
    (["# only a comment"], "no entries"),
])
def test_a_bad_file_is_one_line_and_exit_2_before_the_run(tmp_path: Path, lines: list[str] | None, says: str) -> None:
    path = tmp_path / "bad.jsonl"
    if lines is not None:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(says)):
        preflight(f"scripted:{path}")
    tasks = _write(tmp_path / "tasks.jsonl", TASK.model_dump_json())
    proc = run_cli("run", "--tasks", str(tasks), "--agent", "guess", "--model", f"scripted:{path}",
                   "--out", str(tmp_path / "run"), "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr and says in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


# -- through the CLI ---------------------------------------------------------------------------------


def _run(corpus: Corpus, tmp_path: Path, agent: str, script: Path, out: str = "run") -> subprocess.CompletedProcess[str]:
    """`deskbench run` from the example's folder, where `keyword_agent:KeywordAgent` is found (as
    `python -m` puts the working folder first): in this process (PYTHONPATH= would need a fresh
    interpreter; the demo's next command below runs that form as printed)."""
    tasks = _write(tmp_path / "tasks.jsonl", TASK.model_dump_json())
    return run_cli("run", "--tasks", str(tasks), "--corpus", str(corpus.root), "--agent", agent, "--model",
                   f"scripted:{script}", "--out", str(tmp_path / out), "--json", "--quiet", cwd=EXAMPLE)


def test_a_looping_agent_searches_then_answers_from_the_turns(operator_corpus: Corpus, tmp_path: Path) -> None:
    script = _write(tmp_path / "loop.jsonl", {"question": WINTER, "turns": [
        {"tool_calls": [{"name": "search_documents", "arguments": {"query": "winter rental"}}]},
        {"tool_calls": [{"name": "provide_answer", "arguments": ANSWER}]}]})
    proc = _run(operator_corpus, tmp_path, "bm25-agent", script)
    assert proc.returncode == 0, proc.stderr
    (system, report), = json.loads(proc.stdout).items()
    assert system == "bm25-agent:scripted/loop" and report["accuracy"] == 1.0
    (episode,) = RunStore(tmp_path / "run").episodes()
    assert episode.submission is not None and episode.submission.search_history == ["winter rental"]


def test_a_resume_with_a_changed_file_is_refused(operator_corpus: Corpus, tmp_path: Path) -> None:
    script = _write(tmp_path / "answers.jsonl", {"question": WINTER, "content": ANSWER})
    first = _run(operator_corpus, tmp_path, "keyword_agent:KeywordAgent", script)
    assert first.returncode == 0, first.stderr
    (report,) = json.loads(first.stdout).values()
    assert report["accuracy"] == 1.0
    same = _run(operator_corpus, tmp_path, "keyword_agent:KeywordAgent", script)
    assert same.returncode == 0 and "1 already done" in same.stderr, same.stderr
    _write(script, {"question": WINTER, "content": {"answer": ["Bell 407"], "citations": []}})
    changed = _run(operator_corpus, tmp_path, "keyword_agent:KeywordAgent", script)
    assert changed.returncode == 2
    assert "model replies: sha256:" in changed.stderr and "the file the model answers from changed" in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1
    fresh = _run(operator_corpus, tmp_path, "keyword_agent:KeywordAgent", script, out="run2")  # a new --out runs it
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["keyword_agent:KeywordAgent:scripted/answers"][
        "accuracy"] == 0.0


def test_the_demo_answers_file_is_what_its_script_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_demo_answers", EXAMPLE / "make_demo_answers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DEMO_ANSWERS.read_text(encoding="utf-8") == module.demo_answers()


# -- the demo ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`deskbench demo` once, its agents on the scripted model (no local model needed)."""
    require_tool("tesseract")
    out = tmp_path_factory.mktemp("first-hour") / "demo"
    proc = run_cli("demo", "--out", str(out), "--model", f"scripted:{DEMO_ANSWERS.relative_to(REPO)}", "--quiet",
                   cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_the_demo_stores_its_scorings(demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = demo_run
    runs = sorted(p for p in (out / "runs").iterdir() if (p / "run.sqlite").exists())
    assert any(p.name == "lexical" for p in runs) and len(runs) >= 2
    for run_dir in runs:
        store = RunStore(run_dir, create=False)
        (scoring,) = store.scorings()
        for system in store.systems():
            assert len(store.scored_items(system)) == len(store.episodes(system)) > 0, run_dir.name
    lexical = RunStore(out / "runs" / "lexical", create=False)
    assert lexical.scorings()[0].settings.describe() == "ANLS* >= 0.5, no judge"
    info = run_cli("info", str(out / "runs" / "lexical"))
    assert info.returncode == 0 and "scoring #1 (ANLS* >= 0.5, no judge)" in info.stdout
    assert "scorings: none stored" not in info.stdout
    assert proc.stdout.count("docqa leaderboard") == 1  # the stored scoring prints no table of its own


def test_the_demo_ends_with_a_next_command_that_runs_as_printed(
        demo_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = demo_run
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("PYTHONPATH=examples/custom_agent ") and " run --agent keyword_agent:KeywordAgent " in line
    assert "--model scripted:examples/custom_agent/demo_answers.jsonl" in line
    assert f"--corpus {out / 'corpus'}" in line and "--tasks src/deskbench/data/demo/docqa/tasks.jsonl" in line
    ran = subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    store = RunStore(out / "runs" / "keyword-agent", create=False)
    (system,) = store.systems()
    assert system == "keyword_agent:KeywordAgent:scripted/demo_answers"
    items = [item for _, item in store.scored_items(system).values()]
    assert len(items) == 60 and sum(bool(i.correct) for i in items) == 40  # a measurement: 10 missing, 10 wrong
    assert sum(e.status == "error" for e in store.episodes(system)) == 10
    assert "Accuracy" in ran.stdout and "66.7" in ran.stdout


def test_the_next_command_names_paths_from_where_demo_sh_was_started(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    from deskbench.cli.demo import next_command

    monkeypatch.chdir(REPO)  # scripts/demo.sh changes to the repo root
    tasks, out = Path("src/deskbench/data/demo/docqa/tasks.jsonl"), Path(".demo")
    assert "--corpus .demo/corpus --out .demo/runs/keyword-agent" in next_command("deskbench", tasks, out)
    monkeypatch.setenv("DESKBENCH_SHOW_PATHS_FROM", str(tmp_path))  # ...from another directory
    line = next_command("deskbench", tasks, out)
    assert f"PYTHONPATH={EXAMPLE} " in line and f"--model scripted:{DEMO_ANSWERS} " in line
    assert f"--tasks {REPO / tasks} --corpus {REPO / out / 'corpus'} " in line
