"""`deskbench schema` and `deskbench init` (issue 23 item 4): the schemas validate the bundled demo
tasks, init over the demo PDFs gives a command that runs and stores episodes, init over
spreadsheets copies them and writes valid tasks, and a user's mistakes are one line, exit 2."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from deskbench.cli.app import app
from deskbench.contract.registry import register_track, unregister_track
from deskbench.generate.demo import bundled_dir
from deskbench.runs.store import RunStore
from deskbench.tracks.analytics.tasks import read_tasks as read_analytics
from deskbench.tracks.docqa.tasks import read_tasks as read_docqa

DEMO = bundled_dir()


def _cli(*args: str):  # -> click.testing.Result
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def _schema(*args: str) -> dict:
    return json.loads(_cli("schema", *args).stdout)


def _deskbench(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script as a user meets it (main() turns a UserError into exit 2)."""
    return subprocess.run([sys.executable, "-m", "deskbench.cli", *args], capture_output=True, text=True, timeout=300)


def _validator(schema: dict) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("track, tasks", [("docqa", "docqa/tasks.jsonl"), ("analytics", "analytics/tasks.jsonl")])
def test_the_task_schema_validates_the_bundled_demo_tasks(track: str, tasks: str) -> None:
    validator = _validator(_schema(track))
    rows = [json.loads(line) for line in (DEMO / tasks).read_text(encoding="utf-8").splitlines() if line.strip()]
    assert rows
    for row in rows:
        validator.validate(row)
    # and it is not a schema that takes anything: a row missing its question or instruction fails
    broken = dict(rows[0])
    broken.pop("question" if track == "docqa" else "instruction")
    assert not validator.is_valid(broken)


def test_the_deliverables_schema_validates_the_bundled_packages() -> None:
    validator = _validator(_schema("deliverables"))
    packages = sorted((DEMO / "deliverables").rglob("task.yaml"))
    assert packages
    for path in packages:
        validator.validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    data = yaml.safe_load(packages[0].read_text(encoding="utf-8"))
    data["prompt_class"] = "XYZ"
    assert not validator.is_valid(data)


def test_submission_schemas_validate_what_the_tracks_write() -> None:
    from deskbench.tasks.outputs import OutputFileRecord
    from deskbench.tracks.analytics.tasks import AnalyticsSubmission
    from deskbench.tracks.deliverables.tasks import DeliverableSubmission
    from deskbench.tracks.docqa.tasks import DocQASubmission

    made = {
        "docqa": DocQASubmission(id="q1", answer=["186"], citations=[{"document": "a.pdf", "page": 3}], steps=2),
        "analytics": AnalyticsSubmission(id="an-1", answer="12.3", rounds=2,
                                         files=[OutputFileRecord(name="out.xlsx", size=10, sha256="ab")]),
        "deliverables": DeliverableSubmission(id="d1", response="DECISION: SIGN", rounds=1),
    }
    for track, submission in made.items():
        schema = _schema(track, "--submission")
        assert schema["title"] == type(submission).__name__
        _validator(schema).validate(json.loads(submission.model_dump_json()))
    # the official MADQA predictions shape (citations saying `file`) is one the schema takes too
    _validator(_schema("docqa", "--submission")).validate(
        {"question": "q", "answer": "x", "citations": [{"file": "a.pdf", "page": 1}]})


def test_a_plugin_track_has_its_schema_too() -> None:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    try:
        from echo_track import TRACK  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    register_track(TRACK)
    try:
        assert _schema("echo")["title"] == TRACK.task_type.__name__
        assert _schema("echo", "--submission")["title"] == TRACK.submission_type.__name__
    finally:
        unregister_track("echo")


@pytest.fixture(scope="module")
def docqa_set(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """init over five of the demo PDFs (a subfolder, as a user's folder would be laid out)."""
    root = tmp_path_factory.mktemp("init")
    pdfs = root / "my pdfs" / "nested"
    pdfs.mkdir(parents=True)
    for pdf in sorted((DEMO / "docqa" / "pdfs").glob("*.pdf"))[:5]:
        shutil.copy(pdf, pdfs / pdf.name)
    result = _cli("init", str(root / "set"), "--track", "docqa", "--from", str(root / "my pdfs"), "--quiet")
    yield root / "set", result.stdout.strip().splitlines()[-1]


def test_init_over_pdfs_writes_todo_questions_on_pages_that_exist(docqa_set: tuple[Path, str]) -> None:
    from deskbench.corpus.corpus import Corpus

    dest, _ = docqa_set
    tasks = read_docqa(dest / "tasks.jsonl").items
    corpus = Corpus.open(dest / "corpus")
    docs = {d.doc_id: d.page_count for d in corpus.documents()}
    assert len(docs) == 5
    assert {t.evidence[0].document for t in tasks} == set(docs)  # every document has its questions
    for task in tasks:
        assert task.question.startswith("TODO") and task.answer_variants[0][0].startswith("TODO")
        (ev,) = task.evidence
        assert 1 <= ev.page <= docs[ev.document]
    assert "TODO" in (dest / "README.txt").read_text(encoding="utf-8")


def test_the_printed_command_runs_and_stores_episodes(docqa_set: tuple[Path, str]) -> None:
    dest, command = docqa_set
    argv = shlex.split(command)
    assert argv[:2] == ["deskbench", "run"] and "lexical" in argv
    result = _deskbench(*argv[1:], "--quiet")
    assert result.returncode == 0, result.stderr
    run_dir = Path(argv[argv.index("--out") + 1])
    episodes = RunStore(run_dir, create=False).episodes()
    assert len(episodes) == len(read_docqa(dest / "tasks.jsonl").items)
    assert all(e.status == "ok" for e in episodes)


def test_init_over_spreadsheets_copies_them_and_writes_template_tasks(tmp_path: Path) -> None:
    source = tmp_path / "sheets"
    (source / "a").mkdir(parents=True)
    (source / "b").mkdir()
    xlsx = next((DEMO / "analytics" / "inputs").rglob("*.xlsx"))
    shutil.copy(xlsx, source / "a" / "sales.xlsx")
    shutil.copy(xlsx, source / "b" / "sales.xlsx")  # the same name in two folders: both kept
    (source / "b" / "orders.csv").write_text("id,amount\n1,10\n2,20\n", encoding="utf-8")
    (source / "notes.txt").write_text("not a spreadsheet", encoding="utf-8")
    dest = tmp_path / "set"
    result = _cli("init", str(dest), "--track", "analytics", "--from", str(source), "--quiet")
    tasks = read_analytics(dest / "tasks.jsonl").items
    assert sorted(t.inputs[0] for t in tasks) == ["inputs/a/sales.xlsx", "inputs/b/orders.csv", "inputs/b/sales.xlsx"]
    assert len({t.id for t in tasks}) == 3
    for task in tasks:
        assert (dest / task.inputs[0]).read_bytes() == (source / task.inputs[0].removeprefix("inputs/")).read_bytes()
        assert task.instruction.startswith("TODO") and task.answer and task.answer.startswith("TODO")
    command = shlex.split(result.stdout.strip().splitlines()[-1])
    assert command[:2] == ["deskbench", "run"] and command[command.index("--tasks") + 1] == str(dest / "tasks.jsonl")
    assert command[command.index("--model") + 1] == "local"  # no key needed


def test_user_mistakes_are_one_line_and_exit_2(tmp_path: Path) -> None:
    unknown = _deskbench("schema", "nope")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert len(unknown.stderr.strip().splitlines()) == 1 and "docqa, analytics, deliverables" in unknown.stderr

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me", encoding="utf-8")
    refused = _deskbench("init", str(taken), "--track", "analytics")
    assert refused.returncode == 2 and "not an empty folder" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]

    empty = tmp_path / "no-sheets"
    empty.mkdir()
    nothing = _deskbench("init", str(tmp_path / "new"), "--track", "analytics", "--from", str(empty))
    assert nothing.returncode == 2 and "no spreadsheets" in nothing.stderr
    assert not (tmp_path / "new").exists()  # a failed init leaves no half-made folder

    deliverables = _deskbench("init", str(tmp_path / "d"), "--track", "deliverables")
    assert deliverables.returncode == 2 and "docqa or analytics" in deliverables.stderr


def test_formats_md_names_every_field_of_every_model() -> None:
    from deskbench.cli.schema import models_of
    from deskbench.contract.registry import BUILTIN, get_track

    text = (Path(__file__).parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    missing: list[str] = []
    for name in BUILTIN:
        track = get_track(name)
        assert f"## {name}\n" in text
        for model in models_of(track.task_type) + models_of(track.submission_type):
            heading = f"#### {model.__name__}\n"
            if heading not in text:
                missing.append(model.__name__)
                continue
            section = text.split(heading, 1)[1].split("\n#### ", 1)[0]
            if "As above." in section:
                section = text  # a model documented once, under the first heading
            for field, info in model.model_fields.items():
                shown = info.alias if model.model_config.get("populate_by_name") and info.alias else field
                if not info.exclude and f"`{shown}`" not in section:
                    missing.append(f"{model.__name__}.{shown}")
    assert not missing, f"docs/formats.md does not name: {missing}"
