"""`deskbench export RUN --format madqa`: a docqa run as the official MADQA predictions files
(github OxRML/MADQA baselines/bm25-mllm-agent/process_dataset.py's lines), read by the official
eval/evaluate.py and by `deskbench import`.

The run is built offline (tests/madqa_export_run.py: the operator corpus, two scripted models, one
errored and one step-limited episode, one system run with --limit). tests/data/madqa_export holds
the export of that same run as the official evaluator read it and what the evaluator printed on it
(official.json, made by generate.py there with the official code, its hub download and Gemini judge
replaced as for tests/data/madqa_parity). The checks: the lines have the official writer's fields,
in its order, line by line; the fresh export carries what the evaluator reads exactly as the stored
one; `deskbench score RUN --official` (ANLS*, and with the parity fixtures' deterministic judge)
prints the evaluator's numbers to 1e-9, as does scoring the exported file; and `deskbench import`
of each file gives the same scores back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli
from madqa_export_run import DATA, FILES, TASKS, build_run

from deskbench.runs.store import RunStore

OFFICIAL = json.loads((DATA / "official.json").read_text(encoding="utf-8"))
JUDGE = "tests.madqa_stand_in_judge:verdicts/sha256"
BY = ("--by", "domain", "--by", "category")

# Facts from the official code (github OxRML/MADQA, commit 978fa76, baselines/bm25-mllm-agent/):
# openai_agent.py answer_question's return dict, then process_question's `result['id'] = ...`
ANSWERED_KEYS = ["question", "answer", "citations", "iterations", "search_history", "trajectory", "model", "id"]
# process_question's except branch
ERROR_KEYS = ["question", "id", "error", "error_traceback", "ground_truth_answers", "category"]
SEARCH_KEYS = ["iteration", "query", "num_results"]
# openai_agent.py's step: these first, then tool_calls (when any), then parsed_answer or tool_results
STEP_HEAD = ["iteration", "role", "finish_reason", "usage", "content"]
USAGE_KEYS = ["prompt_tokens", "completion_tokens", "total_tokens"]
TOOL_RESULT_KEYS = ["tool_call_id", "name", "query", "results"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the run, the folder it was exported to)."""
    root = tmp_path_factory.mktemp("madqa-export")
    run = build_run(root)
    proc = run_cli("export", str(run), "--format", "madqa", "-o", str(root / "export"))
    assert proc.returncode == 0, proc.stderr
    assert "2 madqa predictions file(s) written" in proc.stdout
    return run, root / "export"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_one_file_per_system_with_only_the_tasks_it_ran(exported: tuple[Path, Path]) -> None:
    run, out = exported
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES.values())
    store = RunStore(run, create=False)
    try:
        for system, name in FILES.items():
            episodes = store.episodes(system)
            assert [r["id"] for r in _lines(out / name)] == [e.task_id for e in episodes]  # as they ended
    finally:
        store.close()
    limited = _lines(out / FILES["bm25-agent:scripted/answers-b"])
    assert [r["id"] for r in limited] == ["x1", "x2", "x3", "x4", "x5"]  # --limit 5: x6-x8 not run, not written


def _check_step(step: dict[str, Any], final: bool, row: dict[str, Any]) -> None:
    keys = list(step)
    assert keys[:5] == STEP_HEAD and step["role"] == "assistant"
    assert list(step["usage"]) == USAGE_KEYS and step["usage"]["total_tokens"] == 0  # a scripted model counts none
    rest = keys[5:]
    if "tool_calls" in step:
        assert rest[0] == "tool_calls"
        assert all(list(c) == ["id", "name", "arguments"] for c in step["tool_calls"])
        rest = rest[1:]
    if final:
        assert rest == ["parsed_answer"]
        assert step["parsed_answer"] == {"answer": row["answer"], "citations": row["citations"]}
    else:
        assert rest == ["tool_results"]


def test_every_line_has_the_official_writers_fields(exported: tuple[Path, Path]) -> None:
    _, out = exported
    errors = {}
    for system, name in FILES.items():
        for row in _lines(out / name):
            if "error" in row:
                assert list(row) == ERROR_KEYS and row["error"], row  # never an empty answer
                assert row["error_traceback"] is None and row["ground_truth_answers"] is None and row["category"] is None
                errors[(system, row["id"])] = row["error"]
                continue
            assert list(row) == ANSWERED_KEYS, row
            assert isinstance(row["answer"], list) and all(isinstance(a, str) for a in row["answer"])
            assert all(list(c) == ["file", "page"] and isinstance(c["page"], int) for c in row["citations"])
            assert row["model"] == system.split("/")[-1]  # the script's --model: no provider
            steps = row["trajectory"]
            assert [s["iteration"] for s in steps] == list(range(1, row["iterations"] + 1))
            for k, step in enumerate(steps):
                _check_step(step, k == len(steps) - 1, row)
            searched = [r for s in steps[:-1] for r in s["tool_results"] if "query" in r]
            assert all(list(r) == TOOL_RESULT_KEYS for r in searched)
            history = row["search_history"]
            assert all(list(h) == SEARCH_KEYS for h in history)
            assert [(h["iteration"], h["query"], h["num_results"]) for h in history] == [
                (s["iteration"], r["query"], len(r["results"])) for s in steps for r in s.get("tool_results", [])
                if "query" in r]
            assert [r["tool_call_id"] for r in searched] == [c["id"] for s in steps[:-1] for c in s.get("tool_calls", [])
                                                             if c["name"] == "search_documents"]
    assert set(errors) == {("bm25-agent:scripted/answers-a", "x5"), ("bm25-agent:scripted/answers-b", "x2")}
    assert "no reply in answers-a.jsonl" in errors[("bm25-agent:scripted/answers-a", "x5")]
    assert errors[("bm25-agent:scripted/answers-b", "x2")] == "no answer after 4 iterations"  # a step limit


def test_a_refused_tool_call_is_an_error_result_and_searches_carry_their_pages(exported: tuple[Path, Path]) -> None:
    _, out = exported
    rows = {r["id"]: r for r in _lines(out / FILES["bm25-agent:scripted/answers-a"])}
    steps = rows["x4"]["trajectory"]  # search, a malformed provide_answer (repaired), the answer
    assert steps[1]["tool_calls"][0]["name"] == "provide_answer"
    assert isinstance(steps[1]["tool_calls"][0]["arguments"], str)  # not JSON: kept as the model wrote it
    (refused,) = steps[1]["tool_results"]
    assert list(refused) == ["tool_call_id", "name", "error"] and refused["name"] == "provide_answer"
    assert refused["tool_call_id"] == steps[1]["tool_calls"][0]["id"] and refused["error"].startswith("error:")
    assert steps[0]["tool_results"][0]["results"] == [{"file": "alpha.pdf", "page": 2}]
    assert rows["x6"]["search_history"] == [{"iteration": 1, "query": "cars", "num_results": 2}]
    assert "Café Résumé" in (out / FILES["bm25-agent:scripted/answers-b"]).read_text(encoding="utf-8")  # as written


def _read(row: dict[str, Any]) -> tuple[Any, ...]:
    """What the official evaluator reads of a line (and whether it is an error row)."""
    history = row.get("search_history")
    return (row.get("question"), row.get("id"), row.get("answer"), row.get("citations"),
            len(history) if history else None, row.get("iterations"), "error" in row)


@pytest.mark.parametrize("name", sorted(FILES.values()))
def test_the_export_is_the_one_the_official_evaluator_read(exported: tuple[Path, Path], name: str) -> None:
    _, out = exported
    assert [_read(r) for r in _lines(out / name)] == [_read(r) for r in _lines(DATA / "export" / name)]


def _assert_same(ours: Any, theirs: Any, where: str) -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) >= set(theirs), f"{where}: {sorted(theirs)} vs {sorted(ours)}"
        for key, value in theirs.items():
            _assert_same(ours[key], value, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _assert_same(a, b, f"{where}[{k}]")
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, abs=1e-9, rel=0), f"{where}: {ours} vs official {theirs}"
    else:
        assert ours == theirs, f"{where}: {ours!r} vs official {theirs!r}"


def _same_as_official(metrics: dict[str, Any], mode: str, name: str) -> None:
    theirs = OFFICIAL["results"][mode][Path(name).stem]
    for part in ("overall", "by_hop_type", "by_category", "by_domain"):
        _assert_same(metrics[part], theirs[part], f"{name}/{mode}.{part}")
        assert set(metrics[part]) >= set(theirs[part])


def _printed_block(m: dict[str, Any], semantic: bool) -> str:
    """The official print_metrics lines of a result's overall numbers, rendered from ours."""
    if semantic:
        lo, hi = m["semantic_ci"]
        head = (f"  Semantic Accuracy:    {m['mean_semantic']:.2%} [{lo:.2%}-{hi:.2%}]\n"
                f"  ANLS* (string):       {m['mean_anls']:.4f}\n")
    else:
        head = f"  Accuracy (ANLS*>=0.5): {m['accuracy']:.1%}\n  Mean ANLS*:           {m['mean_anls']:.4f}\n"
    lines = head + f"  Document F1:          {m['doc_f1']:.4f}\n  Page F1:              {m['page_f1']:.4f}\n"
    if not m["kuiper_degenerate"]:
        lines += f"  Kuiper Statistic:     {m['kuiper_stat']:.2f}\n"
    return lines


def _score(*args: str) -> dict[str, Any]:
    proc = run_cli("score", *args, "--official", "--json", *BY, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("mode", ["anls", "semantic"])
def test_deskbench_score_official_prints_the_official_evaluators_numbers(exported: tuple[Path, Path], mode: str) -> None:
    run, out = exported
    judge = ("--judge", JUDGE, "--no-cache") if mode == "semantic" else ()
    reports = _score(str(run), *judge)
    assert set(reports) == set(FILES)
    for system, name in FILES.items():
        metrics = reports[system]["official_metrics"]
        _same_as_official(metrics, mode, name)
        stem = Path(name).stem
        block = f"{stem} (n={metrics['overall']['n']}):\n" + _printed_block(metrics["overall"], mode == "semantic")
        assert block in OFFICIAL["printed"][mode], block  # the evaluator's own text, rendered from our numbers
        _same_as_official(_score(str(out / name), "--tasks", str(TASKS), *judge)["official_metrics"], mode, name)


def test_deskbench_import_of_the_export_scores_the_same(exported: tuple[Path, Path], tmp_path: Path) -> None:
    run, out = exported
    back = tmp_path / "imported"
    for system, name in FILES.items():
        proc = run_cli("import", str(out / name), "--tasks", str(TASKS), "--system", system, "--out", str(back), cwd=REPO)
        assert proc.returncode == 0, proc.stderr
    for mode, judge in (("anls", ()), ("semantic", ("--judge", JUDGE, "--no-cache"))):
        reports = _score(str(back), *judge)
        for system, name in FILES.items():
            _same_as_official(reports[system]["official_metrics"], mode, name)
    plain = run_cli("score", str(run), "--json", *BY, cwd=REPO)
    again = run_cli("score", str(back), "--json", *BY, cwd=REPO)
    assert plain.returncode == 0 and again.returncode == 0, plain.stderr + again.stderr
    ours, theirs = json.loads(plain.stdout), json.loads(again.stdout)
    # deskbench's own numbers too, but for effort: without --official it reads the run's `steps` (searches:
    # 0 for an answer given without one), which the official lines do not carry (they give iterations: 1)
    same = ("n", "n_missing", "n_errors", "missing_ids", "error_ids", "accuracy", "accuracy_ci", "mean_anls",
            "page_f1", "doc_f1")
    for system in FILES:
        assert {k: theirs[system][k] for k in same} == {k: ours[system][k] for k in same}, system
        for group in ("by_hop_type", "by_domain", "by_category"):
            for key, value in ours[system][group].items():
                assert {k: theirs[system][group][key][k] for k in same if k in value} == {
                    k: value[k] for k in same if k in value}, (system, group, key)


def test_bad_input_is_one_line(exported: tuple[Path, Path], tmp_path: Path) -> None:
    run, out = exported
    other = RunStore(tmp_path / "analytics-run")
    other.set_meta("track", "analytics")
    other.close()
    cases = [
        (("export", str(tmp_path / "analytics-run"), "--format", "madqa", "-o", str(tmp_path / "x")), "docqa"),
        (("export", str(run), "--format", "madqa-v2", "-o", str(tmp_path / "y")), "madqa"),  # names the formats
        (("export", str(run), "--format", "madqa", "-o", str(out)), "already exists"),
    ]
    for args, said in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and said in proc.stderr, proc.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    assert [_read(r) for r in _lines(out / FILES["bm25-agent:scripted/answers-a"])] == [
        _read(r) for r in _lines(DATA / "export" / FILES["bm25-agent:scripted/answers-a"])]  # not overwritten


# --- the other providers' step shapes, and an imported system written back ----------------------

def _episode_and_transcript() -> tuple[Any, Any]:
    """One search then an answer, stored as a run stores them (what the exporter reads)."""
    from deskbench.runs.store import Episode
    from deskbench.runs.transcript import ModelCallEvent, ToolEvent, TranscriptDoc
    from deskbench.tracks.docqa.tasks import DocQASubmission

    def call(at: float, finish: str, calls: list[dict[str, Any]], text: str = "") -> ModelCallEvent:
        message = {"role": "assistant", "content": text, "tool_calls": calls,
                   "reasoning": [{"text": "thinking it over", "signature": "sig"}]}
        return ModelCallEvent(at=at, seconds=0.1, model="m", prefix=0, messages=[],
                              reply={"message": message, "finish_reason": finish,
                                     "usage": {"input_tokens": 7, "output_tokens": 3}})

    doc = TranscriptDoc(events=[
        call(0.0, "tool_use", [{"id": "tu_1", "name": "search_documents", "arguments": '{"query": "bell"}'}], "Let me look."),
        ToolEvent(at=0.2, name="search_documents", arguments={"query": "bell"},
                  result={"pages": [["beta.pdf", 2], ["alpha.pdf", 1]]}),
        call(0.3, "tool_use", [{"id": "tu_2", "name": "provide_answer",
                                "arguments": '{"answer": ["Bell 407"], "citations": [{"file": "beta.pdf", "page": 2}]}'}]),
    ])
    sub = DocQASubmission(id="x2", question="Q?", answer=["Bell 407"], citations=[{"file": "beta.pdf", "page": 2}],  # type: ignore[list-item]
                          search_history=["bell"], iterations=2, steps=1)
    return Episode(task_id="x2", system="bm25-agent:p/m", status="ok", submission=sub), doc


# facts from each official script (commit 978fa76): a searching step's keys, the answering step's, and the parts'
SHAPES = {
    "anthropic_step": (["iteration", "role", "stop_reason", "usage", "content", "tool_calls", "thinking", "tool_results"],
                       ["iteration", "role", "stop_reason", "usage", "content", "tool_calls", "thinking"],
                       ["input_tokens", "output_tokens"], ["id", "name", "input"], ["tool_use_id", "name", "query", "results"]),
    "vllm_step": (["iteration", "role", "finish_reason", "content", "usage", "tool_calls", "tool_results"],
                  ["iteration", "role", "finish_reason", "content", "usage", "tool_calls", "parsed_answer"],
                  USAGE_KEYS, ["id", "name", "arguments"], TOOL_RESULT_KEYS),
    "gemini_step": (["iteration", "role", "finish_reason", "content", "tool_calls", "tool_results"],
                    ["iteration", "role", "finish_reason", "content", "tool_calls", "parsed_answer"],
                    None, ["name", "args"], ["name", "query", "results"]),
    "openai_step": (STEP_HEAD + ["tool_calls", "thinking", "tool_results"],
                    STEP_HEAD + ["tool_calls", "thinking", "parsed_answer"],
                    USAGE_KEYS, ["id", "name", "arguments"], TOOL_RESULT_KEYS),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_providers_steps_follow_its_official_script(shape: str) -> None:
    from deskbench.tracks.docqa import export_madqa as madqa

    searching, answering, usage, call_keys, result_keys = SHAPES[shape]
    episode, doc = _episode_and_transcript()
    row = madqa.answered_row("Q?", episode, episode.submission, doc, madqa.SystemInfo("m", getattr(madqa, shape)))
    first, last = row["trajectory"]
    assert list(first) == searching and list(last) == answering
    if usage is not None:
        assert list(first["usage"]) == usage and first["usage"][usage[0]] == 7
    assert list(first["tool_calls"][0]) == call_keys and list(first["tool_results"][0]) == result_keys
    assert first["tool_results"][0]["results"] == [{"file": "beta.pdf", "page": 2}, {"file": "alpha.pdf", "page": 1}]
    assert first["content"] == "Let me look." and last["content"] is None
    if "thinking" in first:
        assert first["thinking"] == "thinking it over"
    assert row["search_history"] == [{"iteration": 1, "query": "bell", "num_results": 2}]



def test_the_shape_is_the_protocols_script_else_the_providers() -> None:
    from deskbench.tracks.docqa import export_madqa as madqa

    assert madqa.step_shape("anthropic_agent.py", "openai-compat/claude-proxy") is madqa.anthropic_step
    assert madqa.step_shape("gemini_agent.py", "google/gemini-2.5-flash") is madqa.gemini_step
    assert madqa.step_shape("paper", "anthropic/claude-sonnet-4-5") is madqa.anthropic_step
    assert madqa.step_shape("paper", "vllm/qwen") is madqa.vllm_step
    assert madqa.step_shape(None, "mistral/pixtral-large-latest") is madqa.openai_step  # no mistral script
    assert madqa.step_shape(None, None) is madqa.openai_step  # process_dataset.py's default provider


def test_without_a_transcript_the_steps_come_from_the_trajectory() -> None:
    from deskbench.tasks.trajectory import ModelCallStep, ToolCallStep
    from deskbench.tracks.docqa import export_madqa as madqa

    episode, _ = _episode_and_transcript()
    episode.trajectory = [ModelCallStep(input_tokens=7, output_tokens=3),
                          ToolCallStep(name="search_documents", arguments={"query": "bell"},
                                       result={"pages": [["beta.pdf", 2]]}),
                          ModelCallStep(input_tokens=9, output_tokens=4)]
    row = madqa.answered_row("Q?", episode, episode.submission, None, madqa.SystemInfo("m", madqa.openai_step))
    first, last = row["trajectory"]
    assert first["tool_calls"] == [{"id": None, "name": "search_documents", "arguments": {"query": "bell"}}]
    assert first["tool_results"] == [{"tool_call_id": None, "name": "search_documents", "query": "bell",
                                      "results": [{"file": "beta.pdf", "page": 2}]}]
    assert first["finish_reason"] is None and last["usage"]["total_tokens"] == 13 and "parsed_answer" in last
    assert row["search_history"] == [{"iteration": 1, "query": "bell", "num_results": 1}]


def test_an_imported_official_file_is_written_back_as_it_was_read(tmp_path: Path) -> None:
    parity = REPO / "tests" / "data" / "madqa_parity"
    proc = run_cli("import", str(parity / "bm25.jsonl"), "--tasks", str(parity / "tasks.jsonl"), "--system", "official",
                   "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("export", str(tmp_path / "run"), "--format", "madqa", "-o", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    rows = _lines(tmp_path / "out" / "official.jsonl")
    assert rows == _lines(parity / "bm25.jsonl")  # same lines, same order (key order is the writer's)
    assert all(list(r) == ANSWERED_KEYS for r in rows)
