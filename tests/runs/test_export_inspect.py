"""`deskbench export RUN --format inspect`: one Inspect AI eval log per system, read back with
inspect_ai's own reader, with every non-loopback connection refused while exporting and reading:
the samples, the exact question the scripted server was sent and the exact text it returned,
tool calls with their arguments, the pages, and the scores as the track's scorer gives them."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import run_cli, write_operator_corpus
from fake_openai import FakeOpenAI
from typer.testing import CliRunner

from deskbench.cli import app
from deskbench.contract.registry import get_track
from deskbench.corpus import Corpus
from deskbench.corpus.images import ImageSpec
from deskbench.runs.outcomes import OutcomeOptions
from deskbench.runs.store import RunStore
from deskbench.runs.track import execute_run
from deskbench.tracks.deliverables.tasks import DeliverableTask
from deskbench.tracks.docqa.run import RunSpec, prepare
from deskbench.tracks.docqa.tasks import DocQATask

if TYPE_CHECKING:
    import inspect_ai.log as inspect_log
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageTool,
        ChatMessageUser,
        ContentImage,
        ContentText,
    )


@pytest.fixture(scope="module", autouse=True)
def _inspect_ai() -> None:
    """inspect_ai takes about 3 s to import: loaded when this module's tests run, not when every
    xdist worker collects the suite. The test extra installs deskbench[inspect]: missing in CI is a
    failure, elsewhere a skip."""
    global inspect_log, ChatMessageAssistant, ChatMessageTool, ChatMessageUser, ContentImage, ContentText
    try:
        import inspect_ai.log as inspect_log
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("inspect_ai is not installed: pip install 'deskbench[inspect]'")
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageTool,
        ChatMessageUser,
        ContentImage,
        ContentText,
    )


QUESTION = "Which vehicle rental rates are given for the winter season (quetzal-7)?"
GOOD = DocQATask(id="q1", question=QUESTION, answer_variants=[["Mountain car"]],
                 evidence=[{"document": "alpha.pdf", "page": 1}])  # type: ignore[list-item]
BROKEN_Q = "Which operator runs the night ferry (quetzal-8)?"
BROKEN = DocQATask(id="q2", question=BROKEN_Q, answer_variants=[["Harbour Line"]])
ANSWER = {"answer": ["Mountain car"], "citations": [{"file": "alpha.pdf", "page": 1}]}
BROKEN_ARGS = '{"answer": ["Harbour ñ✓ line\x01break"], "citations": ['
SYSTEM = "bm25-agent:openai/gpt-4.1"
DOCQA_QUESTION_PART = "quetzal-9"  # in the judged run's question (test_transcripts_tracks)


def _tool(name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}


def _script(body: dict[str, Any], n: int) -> dict[str, Any]:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if BROKEN_Q in str(question):
        return _tool("provide_answer", BROKEN_ARGS)
    searched = any(m["role"] == "tool" for m in body["messages"])
    return _tool("provide_answer", ANSWER) if searched else _tool("search_documents", {"query": "mountain car winter"})


def _docqa_run(corpus: Corpus, out: Path, view: str, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    with FakeOpenAI(script=_script) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        spec = RunSpec(agent="bm25-agent", model="openai/gpt-4.1", out=out, corpus=corpus.root, concurrency=1, view=view,
                       preset="paper")  # the Prompt 5 loop (provide_answer) the fake's replies are for
        execute_run(prepare(spec, [GOOD, BROKEN]))
        return list(fake.requests)


def block_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on every connect or DNS lookup to anything but loopback is refused and recorded in
    the list returned (a library that swallows the error is still caught by it)."""
    attempts: list[str] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def loopback(host: object) -> bool:
        if host in ("localhost", None) or isinstance(host, bytes | bytearray):
            return host != b"" if isinstance(host, bytes | bytearray) else True
        try:
            return ipaddress.ip_address(str(host)).is_loopback
        except ValueError:
            return False

    def guard(address: object) -> None:
        host = address[0] if isinstance(address, tuple) else None  # AF_UNIX addresses are paths
        if isinstance(address, tuple) and not loopback(host):
            attempts.append(f"connect {address}")
            raise OSError(f"network blocked by the test: {address}")

    def connect(self: socket.socket, address: Any) -> None:
        guard(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        guard(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not loopback(host):
            attempts.append(f"getaddrinfo {host}")
            raise socket.gaierror(f"network blocked by the test: {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(OSError, match="network blocked"):  # the guard itself works
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    attempts.clear()
    return attempts


def _export(run: Path, out: Path, *extra: str) -> list[Path]:
    result = CliRunner().invoke(app, ["export", str(run), "--format", "inspect", "-o", str(out), *extra])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return sorted(out.glob("*.eval"))


def _texts(content: Any) -> list[str]:
    return [content] if isinstance(content, str) else [p.text for p in content if isinstance(p, ContentText)]


def test_a_docqa_run_exports_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write_operator_corpus(tmp_path / "operators")
    sent = _docqa_run(corpus, tmp_path / "run", "text", monkeypatch)
    offline = block_network(monkeypatch)
    store = RunStore(tmp_path / "run", create=False)
    track = get_track("docqa")
    outcomes = {o.task_id: o for o in track.outcomes(store, SYSTEM, OutcomeOptions())}
    store.close()

    (path,) = _export(tmp_path / "run", tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert offline == []  # nothing reached for the network while writing or reading
    assert log.status == "success" and log.eval.task == "docqa" and log.eval.model == "openai/gpt-4.1"
    assert log.eval.metadata is not None and log.eval.metadata["system"] == SYSTEM
    assert log.eval.metadata["configuration"]["agent"] == "bm25-agent"
    assert log.eval.metadata["configuration"]["settings"]["view"] == "text"
    assert log.samples is not None and sorted((s.id, s.epoch) for s in log.samples) == [("q1", 1), ("q2", 1)]
    good, broken = sorted(log.samples, key=lambda s: str(s.id))

    # the input and target: the task's question and gold answer
    assert good.input == QUESTION and good.target == ["Mountain car"]
    # the question exactly as the server received it, in the chat
    first = sent[0]
    wire_user = next(m["content"] for m in first["messages"] if m["role"] == "user" and QUESTION in str(m["content"]))
    users = [m for m in good.messages if isinstance(m, ChatMessageUser)]
    assert _texts(users[0].content) == [wire_user]
    # the exact replies: tool calls with their arguments, byte for byte after JSON parsing
    assistants = [m for m in good.messages if isinstance(m, ChatMessageAssistant)]
    calls = [c for m in assistants for c in (m.tool_calls or [])]
    assert [(c.function, c.arguments) for c in calls] == [("search_documents", {"query": "mountain car winter"}),
                                                         ("provide_answer", ANSWER)]
    (tool,) = [m for m in good.messages if isinstance(m, ChatMessageTool)]
    assert tool.function == "search_documents" and tool.tool_call_id == calls[0].id
    # the page text the model read (stored by reference) is the one on the wire
    second = next(b for b in sent if any(m["role"] == "tool" for m in b["messages"]) and QUESTION in json.dumps(b))
    wire_pages = [p["text"] for m in second["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                  for p in m["content"] if p["type"] == "text" and not p["text"].startswith(("Results for:", "file: "))]
    exported_pages = [t for m in users[1:] for t in _texts(m.content)
                      if not t.startswith(("Results for:", "file: "))]
    assert wire_pages and exported_pages == wire_pages
    # events: each model call with its full input, the search with its hits and scores
    model_events = [e for e in good.events if e.event == "model"]
    assert len(model_events) == 2 and len(model_events[1].input) > len(model_events[0].input)
    (search,) = [e for e in good.events if e.event == "tool"]
    assert search.arguments == {"query": "mountain car winter"} and search.id == calls[0].id
    assert json.loads(str(search.result))["hits"][0]["file"] == "alpha.pdf"

    # the scores as the track's scorer gives them; metadata: attempt, effort, citations
    assert good.scores is not None and good.scores["score"].value == outcomes["q1"].score
    assert good.scores["correct"].value == ("C" if outcomes["q1"].correct else "I")
    assert good.metadata["attempt"] == 0 and good.metadata["trajectory"]["citations"] == [{"document": "alpha.pdf", "page": 1}]
    assert good.metadata["trajectory"]["model_calls"] == 2 and good.metadata["trajectory"]["input_tokens"] > 0
    assert good.model_usage["openai/gpt-4.1"].input_tokens == good.metadata["trajectory"]["input_tokens"]
    assert good.output.completion == "Mountain car" and outcomes["q1"].score == 1.0

    # the failed episode: its error, the reply that broke it kept verbatim, scored as deskbench does
    assert broken.error is not None
    (bad,) = [c for m in broken.messages if isinstance(m, ChatMessageAssistant) for c in (m.tool_calls or [])][:1]
    assert bad.parse_error is not None and BROKEN_ARGS in bad.parse_error
    assert broken.scores is not None and broken.scores["score"].value == outcomes["q2"].score == 0.0
    (score, correct) = log.results.scores if log.results else ()
    assert (score.scored_samples, score.unscored_samples) == (2, 0)
    assert score.metrics["mean"].value == pytest.approx(0.5) and correct.metrics["accuracy"].value == pytest.approx(0.5)


def test_page_images_are_in_the_log_or_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = write_operator_corpus(tmp_path / "operators")
    _docqa_run(corpus, tmp_path / "run", "image", monkeypatch)
    offline = block_network(monkeypatch)
    (path,) = _export(tmp_path / "run", tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert log.samples is not None
    images = [p for m in log.samples[0].messages if not isinstance(m.content, str)
              for p in m.content if isinstance(p, ContentImage)]
    assert len(images) == 1 and images[0].image.startswith("data:image/png;base64,")
    page = corpus.page_image("alpha.pdf", 1, ImageSpec(dpi=200, format="png"))
    assert base64.b64decode(images[0].image.split(",", 1)[1]) == page
    # --no-images: a placeholder naming the page instead
    (path,) = _export(tmp_path / "run", tmp_path / "plain", "--no-images")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert log.samples is not None
    texts = [t for m in log.samples[0].messages for t in _texts(m.content)]
    assert any("[image page:alpha.pdf#1@200: not shown" in t for t in texts)
    assert not any(isinstance(p, ContentImage) for m in log.samples[0].messages if not isinstance(m.content, str)
                   for p in m.content)
    assert offline == []


@pytest.fixture(scope="module")
def analytics_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from deskbench.tracks.analytics.generate.tasks import generate_analytics
    from deskbench.tracks.analytics.tasks import read_tasks

    out = tmp_path_factory.mktemp("analytics")
    generate_analytics(out, tasks=11, seed=5)
    picked = [t for t in read_tasks(out / "tasks.jsonl").items if t.template in ("qa_quarter_total", "viz_city_bar_cjk")]
    (out / "two.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in picked))  # a QA task, a chart
    return out / "two.jsonl"


def test_an_analytics_run_exports_code_and_output(bwrap: str, analytics_tasks: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from deskbench.tracks.analytics.tasks import read_tasks

    qa, chart = sorted(read_tasks(analytics_tasks).items, key=lambda t: t.category != "qa")
    code = "print('rows:', 12345 + 1)"
    draw = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.bar(['a', 'b'], [1, 2])\nplt.savefig('/mnt/result/chart.png')\n")

    def script(body: dict[str, Any], n: int) -> dict[str, Any]:
        is_qa = qa.instruction in body["messages"][0]["content"]
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {"kind": "tool", "name": "execute_code", "arguments": json.dumps({"code": code if is_qa else draw})}
        return {"kind": "text", "text": f"Final answer: {qa.answer}" if is_qa else "Chart saved as chart.png"}

    with FakeOpenAI(script=script) as fake:
        proc = run_cli("run", "--agent", "analyst-agent", "--tasks", str(analytics_tasks), "--out", str(tmp_path / "run"),
                       "--model", f"openai-compat/scripted@{fake.base_url}", "--concurrency", "1", "--quiet",
                       "--attempts", "2")
        assert proc.returncode == 0, proc.stderr
        sent = list(fake.requests)
    store = RunStore(tmp_path / "run", create=False)
    system = store.systems()[0]
    outcomes = {(o.task_id, o.attempt): o for o in get_track("analytics").outcomes(store, system, OutcomeOptions())}
    store.close()

    offline = block_network(monkeypatch)
    (path,) = _export(tmp_path / "run", tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert offline == [] and log.eval.task == "analytics" and log.samples is not None
    samples = sorted(log.samples, key=lambda s: (s.id != qa.id, s.epoch))  # inspect_ai orders by epoch
    assert [(s.id, s.epoch) for s in samples] == [(qa.id, 1), (qa.id, 2), (chart.id, 1), (chart.id, 2)]
    sample = samples[0]
    assert sample.input == qa.instruction and sample.target == [qa.answer]
    # the prompt as sent, the code the model ran and the exact final text it returned
    assert _texts(sample.messages[0].content) == [sent[0]["messages"][0]["content"]]
    (call,) = [c for m in sample.messages if isinstance(m, ChatMessageAssistant) for c in (m.tool_calls or [])]
    assert call.function == "execute_code" and call.arguments == {"code": code}
    (output,) = [m for m in sample.messages if isinstance(m, ChatMessageTool)]
    assert "rows: 12346" in _texts(output.content)[0]
    assert _texts(sample.messages[-1].content) == [f"Final answer: {qa.answer}"]
    (run_code,) = [e for e in sample.events if e.event == "tool"]
    assert "rows: 12346" in str(run_code.result) and run_code.id == call.id
    for s in samples[:2]:
        outcome = outcomes[(qa.id, s.epoch - 1)]
        assert outcome.status == "scored" and s.scores is not None and s.scores["score"].value == outcome.score
    # a chart without a vision judge is unscored: no score, the reason in its metadata, counted apart
    for s in samples[2:]:
        assert outcomes[(chart.id, s.epoch - 1)].status == "unscored"
        assert s.scores is None and s.metadata["score_status"].startswith("unscored")
        assert s.metadata["trajectory"]["files"] == ["chart.png"]
    assert log.results is not None
    assert [(e.scored_samples, e.unscored_samples) for e in log.results.scores] == [(2, 2), (2, 2)]
    assert log.eval.config.epochs == 2


def test_without_the_extra_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    RunStore(tmp_path / "run").close()
    code = ("import sys; sys.modules['inspect_ai'] = None; from deskbench.cli import main; "
            f"sys.argv = ['deskbench', 'export', {str(tmp_path / 'run')!r}, '--format', 'inspect', '-o', "
            f"{str(tmp_path / 'out')!r}]; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'deskbench[inspect]'" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_run_dir_and_format_are_one_line(tmp_path: Path) -> None:
    proc = run_cli("export", str(tmp_path / "nowhere"), "--format", "inspect", "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and "nowhere does not exist" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    (tmp_path / "run").mkdir()
    RunStore(tmp_path / "run").close()
    proc = run_cli("export", str(tmp_path / "run"), "--format", "parquet", "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and "unknown export format 'parquet'" in proc.stderr and "inspect" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_score_time_judge_calls_are_in_the_sample(operator_corpus: Corpus, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A run scored with --judge keeps the judge's calls (judge_transcripts); the export shows
    them in a span named after the scorer, the verdict's arguments as the server returned them."""
    from test_transcripts_tracks import DOCQA_EXPLANATION, docqa_judged_run

    from deskbench.scoring.judge_log import DOCQA_JUDGE

    run = docqa_judged_run(operator_corpus, tmp_path / "judged")
    offline = block_network(monkeypatch)
    (path,) = _export(run.out, tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert offline == [] and log.samples is not None
    (sample,) = log.samples
    assert sample.metadata["judges"] == [DOCQA_JUDGE]
    spans = [e for e in sample.events if e.event == "span_begin"]
    assert [s.name for s in spans] == [f"judge: {DOCQA_JUDGE}"]
    (judge_call,) = [e for e in sample.events if e.event == "model" and e.span_id == spans[0].id]
    (verdict,) = judge_call.output.message.tool_calls or []
    assert verdict.function == "submit_judgment" and verdict.arguments == json.loads(run.judge_reply)
    assert verdict.arguments["explanation"] == DOCQA_EXPLANATION
    assert any(DOCQA_QUESTION_PART in t for m in judge_call.input for t in _texts(m.content))


def test_scores_are_the_latest_stored_scoring_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run scored with --judge exports the judge's verdicts (not ANLS*'s), with its reasoning as
    the explanation and the scoring named; a re-score without the judge is what a new export says."""
    from test_scorings import SYSTEM, TASKS, VERDICTS, cli, judged_docqa_run

    run = judged_docqa_run(tmp_path)
    store = RunStore(run["out"], create=False)
    judged = store.latest_scoring()
    assert judged is not None and judged.id == 2
    offline = block_network(monkeypatch)
    (path,) = _export(run["out"], tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert offline == [] and log.samples is not None and log.results is not None
    samples = {str(s.id): s for s in log.samples}
    assert set(samples) == {t[0] for t in TASKS}
    want = {"q1": (0.5, "C"), "q2": (1.0, "C")}  # the judge's partial and correct; ANLS* said 1 and 0
    for task_id, (value, correct) in want.items():
        s = samples[task_id]
        assert s.scores is not None and s.scores["score"].value == value and s.scores["correct"].value == correct
        assert VERDICTS[task_id][1] in (s.scores["score"].explanation or "")
        assert s.scores["score"].metadata is not None and s.scores["score"].metadata["scoring"] == judged.id
        assert s.metadata["scored_by"] == judged.label() and f"judge {run['judge']}" in s.metadata["scored_by"]
    mean = next(e for e in log.results.scores if e.name == "score").metrics["mean"].value
    assert mean == run["judged"]["accuracy"]  # the number `score --judge` printed
    assert next(e for e in log.results.scores if e.name == "score").metadata["scorer"] == judged.label()

    cli("score", str(run["out"]), cache=run["cache"])  # again without the judge: ANLS* is the latest
    (path,) = _export(run["out"], tmp_path / "logs2")
    log = inspect_log.read_eval_log(str(path))
    assert log.samples is not None
    values = {str(s.id): s.scores["score"].value for s in log.samples if s.scores is not None}
    assert values == {"q1": 1.0, "q2": 0.0} and all(s.metadata["scoring"] == 3 for s in log.samples)
    assert SYSTEM in store.systems()


def test_a_deliverables_run_exports_prompt_response_and_grading_calls(bwrap: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """deliverable-agent on a bundled package: the prompt as sent, the response as returned, the
    golden answer as target, the ungraded item unscored (no rubric grade yet), the llm_check
    judge's call in its span."""
    from test_transcripts_tracks import deliverables_run

    run = deliverables_run(tmp_path)
    offline = block_network(monkeypatch)
    (path,) = _export(run.out, tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path), resolve_attachments=True)
    assert offline == [] and log.eval.task == "deliverables" and log.samples is not None
    (sample,) = log.samples
    store = RunStore(run.out, create=False)
    (task,) = store.tasks_of(DeliverableTask)
    outcomes = get_track("deliverables").outcomes(store, run.system, OutcomeOptions())
    store.close()
    assert sample.input == task.prompt and sample.target == [task.golden.answer]
    first = run.requests[0]["messages"]
    assert [t for m in sample.messages[: len(first)] for t in _texts(m.content)] == [m["content"] for m in first]
    assert _texts(sample.messages[-1].content) == [run.reply] and sample.output.completion == run.reply
    assert [o.status for o in outcomes] == ["unscored"] and sample.scores is None
    assert sample.metadata["score_status"].startswith("unscored")
    spans = [e.name for e in sample.events if e.event == "span_begin"]
    assert spans == [f"judge: {run.judge_scorer}"]


def test_an_episode_without_a_transcript_still_exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An imported prediction has no transcript: the sample has the task, the answer and the score,
    no messages."""
    from deskbench.runs.store import Episode
    from deskbench.tracks.docqa.tasks import DocQASubmission

    store = RunStore(tmp_path / "run")
    store.save_tasks([GOOD])
    store.set_meta("track", "docqa")
    store.record(Episode(task_id="q1", system="imported", status="ok",
                         submission=DocQASubmission(id="q1", answer=["Mountain car"],
                                                    citations=[{"file": "alpha.pdf", "page": 1}])))  # type: ignore[list-item]
    store.close()
    offline = block_network(monkeypatch)
    (path,) = _export(tmp_path / "run", tmp_path / "logs")
    log = inspect_log.read_eval_log(str(path))
    assert offline == [] and log.samples is not None
    (sample,) = log.samples
    assert sample.input == QUESTION and sample.messages == [] and sample.metadata["transcript"] is False
    assert sample.scores is not None and sample.scores["score"].value == 1.0 and sample.output.completion == "Mountain car"
    assert log.eval.model == "imported"
