"""`--agent openai-deep-research` against the strict simulator of the Responses API (background),
the Files API and the Containers API (tests/sim_openai_deep_research.py): a package run end to end
through `deskbench run` and scored by the track, a run killed with kill -9 while OpenAI works and
rerun (the same response polled, never a second one), and what the simulator refuses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import openai
import pytest
from conftest import run_cli, wait_while_running
from deliverable_responses import bundled_packages, recompute, respond
from sim_openai_deep_research import Research, SimDeepResearch

from deskbench.errors import UserError
from deskbench.runs.outputs import episode_dir
from deskbench.runs.store import RunStore
from deskbench.tracks.deliverables.agent_inputs import DeliverableOptions
from deskbench.tracks.deliverables.deep_research import openai_dr
from deskbench.tracks.deliverables.deep_research.pending import PendingRequest, save_pending
from deskbench.tracks.deliverables.scoring.rubric_qc_citations import validate_citations
from deskbench.tracks.deliverables.tasks import (
    DeliverableSubmission,
    DeliverableTask,
    load_packages,
)

MODEL = "openai/o3-deep-research"
SYSTEM = f"openai-deep-research:{MODEL}"
CITED = "https://stackoverflow.com/questions/13385860"  # the paper's o3 examples of off-topic citations (§4.12)
NEVER_OPENED = "https://datasheet.eeworld.com.cn/view/85833854.html"  # cited, never searched or opened


@pytest.fixture()
def packages(tmp_path: Path) -> Path:
    return bundled_packages(tmp_path / "packages", "dl-0002-rcp", "dl-0003-scp")


class Consultant:
    """The simulated o3: finds its task by the prompt, answers right, its code writing the task's
    files into the container; on the RCP task it also cites a URL only in an annotation."""

    def __init__(self, tasks: list[DeliverableTask], work: Path) -> None:
        self.tasks = tasks
        self.work = work
        self.prompts: list[str] = []
        self.inputs: list[set[str]] = []

    def __call__(self, prompt: str, inputs: dict[str, bytes]) -> Research:
        self.prompts.append(prompt)
        self.inputs.append(set(inputs))
        task = next(t for t in self.tasks if t.prompt in prompt)
        folder = self.work / task.id
        assert task.directory is not None
        text = respond(task, recompute(task, task.directory), folder, set())
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
        cite = [CITED, NEVER_OPENED] if task.prompt_class == "RCP" else []
        return Research(text=text, files=files, cite=cite, searches=[("contact centre AHT benchmark", [CITED])],
                        pages=[CITED], code="import pandas as pd  # writes the deliverable")


def env(sim: SimDeepResearch) -> dict[str, str]:
    return {**sim.env(), openai_dr.POLL_ENV: "0.005"}


def run_args(packages: Path, out: Path) -> list[str]:
    return ["run", "--tasks", str(packages), "--out", str(out), "--agent", "openai-deep-research",
            "--model", MODEL, "--unsafe-local", "--quiet", "--json"]


def items(out: Path, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """`deskbench score`'s items, by task: the verifiers' outcomes."""
    path = tmp_path / "items.jsonl"
    proc = run_cli("score", str(out), "--items-out", str(path))
    assert proc.returncode == 0, proc.stderr
    return {i["task_id"]: i for i in map(json.loads, path.read_text().splitlines())}


def verdicts(item: dict[str, Any]) -> dict[str, str]:
    return {r["id"]: r["status"] for r in item["verifiers"]}


def test_a_package_run_end_to_end_and_scored(packages: Path, tmp_path: Path) -> None:
    tasks = load_packages(packages)
    script = Consultant(tasks, tmp_path / "answers")
    out = tmp_path / "run"
    with SimDeepResearch(research=script) as sim:
        proc = run_cli(*run_args(packages, out), env=env(sim))
        assert proc.returncode == 0, proc.stderr
        assert sim.refused == []
        assert len(sim.created) == 2  # one background response per task
        assert "cost $0.5800" in proc.stderr  # the run's summary counts the responses (2 x $0.29)
        body = next(b for m, p, b in sim.requests if m == "POST" and p.endswith("/responses") and b)
        assert body["background"] is True and body["model"] == "o3-deep-research"
        assert body["reasoning"] == {"summary": "auto"} and body["include"] == openai_dr.INCLUDE
        assert body["tools"][0] == {"type": "web_search_preview"}
        assert body["tools"][1]["type"] == "code_interpreter" and body["tools"][1]["container"]["type"] == "auto"
        uploaded = set(sim.blobs)
        assert len(uploaded) == 7 and set(sim.deleted) == uploaded  # inputs uploaded, then removed
    # the inputs were in the container; the prompt put the discipline first and named the outputs
    rcp = next(p for p in script.prompts if "benchmark_table" in p)
    assert rcp.startswith("CORPUS DISCIPLINE: CLOSED")
    assert "- /mnt/data/benchmark_table.xlsx (xlsx)" in rcp and "Footnote 9" in rcp
    assert {"benchmarks.xlsx", "site_operations.csv"} <= script.inputs[script.prompts.index(rcp)]

    store = RunStore(out, create=False)
    episodes = {ep.task_id: ep for ep in store.episodes()}
    assert {ep.system for ep in episodes.values()} == {SYSTEM}
    assert all(ep.status == "ok" for ep in episodes.values())
    sub = episodes["dl-0002-rcp"].submission
    assert isinstance(sub, DeliverableSubmission)
    assert [f.name for f in sub.files] == ["benchmark_table.xlsx"]
    assert (out / sub.files_dir / "benchmark_table.xlsx").is_file()
    assert sub.rounds == 3 and sub.stop == "answer"  # a search, a page opened, a code run
    # cited only in annotations: listed under the reply
    assert sub.response.rstrip().endswith(f"{openai_dr.CITED_HEADER}\n- {CITED}\n- {NEVER_OPENED}")
    steps = [s.name for s in episodes["dl-0002-rcp"].trajectory if s.kind == "tool_call"]
    assert steps == ["upload_inputs", "web_search", "fetch", "execute_code", "url_citations", "container_files"]
    search = next(s for s in episodes["dl-0002-rcp"].trajectory if s.kind == "tool_call" and s.name == "web_search")
    assert search.result["results"][0]["url"] == CITED
    # usage and cost: tokens at o3-deep-research's price, 2 web search calls, 1 container
    usage = episodes["dl-0003-scp"].usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (1, 12000, 3000, 2000)
    assert usage.cost_usd == pytest.approx((12000 * 10 + 3000 * 40) / 1e6 + 2 * 0.01 + 0.03)
    assert not list(out.rglob("*.pending.json"))

    scored = items(out, tmp_path)
    scp = verdicts(scored["dl-0003-scp"])
    assert scp["file_cost_plan"] == "pass" and scp["json_schema"] == "pass" and scp["absolute_savings"] == "pass"
    rcp_v = verdicts(scored["dl-0002-rcp"])
    assert rcp_v["file_benchmark_table"] == "pass" and rcp_v["table_current_aht"] == "pass"
    assert rcp_v["no_external_citations"] == "fail"  # the annotation-only URL on a closed-corpus task
    proc = run_cli("diagnose", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["systems"][0]["categories"] == {"ok": 2}
    # C.3 (Appendix C) reads what the episode recorded: the searched URL exists, the other does not
    rcp_task = next(t for t in tasks if t.id == "dl-0002-rcp")
    checks = {c.source: c for c in validate_citations(rcp_task, sub, out / sub.files_dir,
                                                       episodes["dl-0002-rcp"].trajectory)}
    assert checks[CITED].exists is True and checks[CITED].authorised is False
    assert checks[NEVER_OPENED].exists is False


def test_a_run_killed_while_openai_works_polls_the_same_response(packages: Path, tmp_path: Path) -> None:
    shutil.rmtree(packages / "dl-0002-rcp")
    tasks = load_packages(packages)
    hold = threading.Event()
    out = tmp_path / "run"
    with SimDeepResearch(research=Consultant(tasks, tmp_path / "answers"), hold=hold) as sim:
        proc = subprocess.Popen([sys.executable, "-m", "deskbench.cli", *run_args(packages, out)],
                                env={**os.environ, **env(sim)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        wait_while_running(lambda: any(out.rglob("*.pending.json")), "pending record", proc, limit=120)
        [rid] = sim.created
        wait_while_running(lambda: sim.responses[rid]["status"] == "in_progress", "poll while in progress", proc,
                           limit=120)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert RunStore(out, create=False).episodes() == []
        [record] = out.rglob("*.pending.json")
        assert json.loads(record.read_text())["id"] == rid

        hold.set()  # OpenAI finishes while nobody waits
        again = run_cli(*run_args(packages, out), env=env(sim))
        assert again.returncode == 0, again.stderr
        assert sim.created == [rid]  # exactly one creation: the rerun polled the same response
        assert sim.refused == []
        assert len(sim.blobs) == 3 and set(sim.deleted) == set(sim.blobs)  # uploaded once, then removed
    [ep] = RunStore(out, create=False).episodes()
    assert ep.status == "ok"
    assert isinstance(ep.submission, DeliverableSubmission)
    assert [f.name for f in ep.submission.files] == ["cost_plan.json"]
    assert (out / ep.submission.files_dir / "cost_plan.json").is_file()
    assert ep.usage.calls == 1  # the response's usage counted once
    assert not record.exists()


def test_an_expired_container_and_a_failed_response_are_episode_errors(packages: Path, tmp_path: Path) -> None:
    shutil.rmtree(packages / "dl-0002-rcp")
    tasks = load_packages(packages)
    consultant = Consultant(tasks, tmp_path / "answers")

    def failed(prompt: str, inputs: dict[str, bytes]) -> Research:
        return Research(text="", status="failed", error={"code": "server_error", "message": "The model failed."})

    with SimDeepResearch(research=failed) as sim:
        proc = run_cli(*run_args(packages, tmp_path / "failed"), env=env(sim))
        assert proc.returncode == 0, proc.stderr
    [ep] = RunStore(tmp_path / "failed", create=False).episodes()
    assert ep.status == "error" and ep.error is not None
    assert "ended failed: server_error: The model failed." in ep.error

    def broken(prompt: str, inputs: dict[str, bytes]) -> Research:  # the paper's Listing 1, in OpenAI's container
        return Research(text="The plan is below.", code="t.rows.cells[0].text = 'x'", logs=(
            "Traceback (most recent call last):\n  File \"<stdin>\", line 1\nAttributeError: 'tuple' object has "
            "no attribute 'cells'\n"))

    with SimDeepResearch(research=broken) as sim:
        proc = run_cli(*run_args(packages, tmp_path / "broken"), env=env(sim))
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("diagnose", str(tmp_path / "broken"), "--json", "--episodes")
    assert proc.returncode == 0, proc.stderr
    diag = json.loads(proc.stdout)
    assert diag["systems"][0]["categories"] == {"file_generation_failed:wrong_api": 1}
    assert "cost_plan.json missing" in diag["episodes"][0]["detail"]

    class Expiring(SimDeepResearch):
        def _complete(self, rid: str) -> None:
            super()._complete(rid)
            self.expire_containers()  # gone before the files are read

    with Expiring(research=consultant) as sim:
        proc = run_cli(*run_args(packages, tmp_path / "expired"), env=env(sim))
        assert proc.returncode == 0, proc.stderr
    [ep] = RunStore(tmp_path / "expired", create=False).episodes()
    assert ep.status == "error" and ep.error is not None and "20 minutes" in ep.error
    assert not list((tmp_path / "expired").rglob("*.pending.json"))  # the response is spent: not polled again


def test_the_model_the_settings_and_the_web_are_checked(packages: Path, tmp_path: Path) -> None:
    shutil.rmtree(packages / "dl-0002-rcp")
    with SimDeepResearch(research=lambda p, i: Research(text="x")) as sim:
        args = run_args(packages, tmp_path / "gpt")
        args[args.index(MODEL)] = "openai/gpt-4o"
        proc = run_cli(*args, env=env(sim))
        assert proc.returncode == 0, proc.stderr
        assert sim.requests == []  # refused before anything is uploaded
    [ep] = RunStore(tmp_path / "gpt", create=False).episodes()
    assert ep.error == ("--agent openai-deep-research runs OpenAI's deep-research models (o3-deep-research, "
                        "o4-mini-deep-research); --model openai/gpt-4o is not one: give e.g. --model "
                        "openai/o3-deep-research")
    assert openai_dr.model_name("openai/o4-mini-deep-research-2025-06-26") == "o4-mini-deep-research-2025-06-26"
    # --web: OpenAI's browser is the agent's own (Table 5); deskbench's cannot be plugged in
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "index.jsonl").write_text("")
    proc = run_cli(*run_args(packages, tmp_path / "web"), "--web", f"recorded:{tmp_path / 'rec'}",
                   env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --agent openai-deep-research searches with OpenAI's own web search, as the paper's o3 did "
        "(Table 5); --web cannot be plugged into it: drop --web for this agent")
    with pytest.raises(UserError, match="is not a number of seconds"):
        os.environ[openai_dr.POLL_ENV] = "soon"
        try:
            openai_dr.make(DeliverableOptions(), None)
        finally:
            del os.environ[openai_dr.POLL_ENV]


def test_a_wait_that_runs_out_keeps_the_record_and_an_incomplete_reply_is_a_limit(
        packages: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.rmtree(packages / "dl-0002-rcp")
    tasks = load_packages(packages)
    hold = threading.Event()
    out = tmp_path / "run"
    with SimDeepResearch(research=Consultant(tasks, tmp_path / "answers"), hold=hold) as sim:
        monkeypatch.setattr(openai_dr, "MAX_WAIT", 0.0)
        proc = run_cli(*run_args(packages, out), env=env(sim))
        assert proc.returncode == 0, proc.stderr
        [ep] = RunStore(out, create=False).episodes()
        assert ep.status == "error" and ep.error is not None and "run again to keep polling it" in ep.error
        assert len(list(out.rglob("*.pending.json"))) == 1 and sim.deleted == []
        monkeypatch.setattr(openai_dr, "MAX_WAIT", 3600.0)
        hold.set()
        proc = run_cli(*run_args(packages, out), "--rerun", env=env(sim))
        assert proc.returncode == 0, proc.stderr
        assert len(sim.created) == 1 and sim.refused == []
    [ep] = RunStore(out, create=False).episodes()
    assert ep.status == "ok" and not list(out.rglob("*.pending.json"))

    # a record whose response OpenAI no longer knows: said, the record removed, nothing submitted
    workdir = episode_dir(out.resolve(), SYSTEM, "dl-0003-scp", 0)
    save_pending(workdir, PendingRequest(provider="openai", api="responses", id="resp_gone", model="o3-deep-research"))
    with SimDeepResearch(research=Consultant(tasks, tmp_path / "answers")) as sim:
        proc = run_cli(*run_args(packages, out), "--rerun", env=env(sim))
        assert proc.returncode == 0, proc.stderr
        assert sim.created == [] and [r[2] for r in sim.refused] == [404]
    [ep] = RunStore(out, create=False).episodes()
    assert ep.status == "error" and ep.error is not None
    assert "response resp_gone is not found at OpenAI" in ep.error and "run again to start a new one" in ep.error
    assert not list(out.rglob("*.pending.json"))

    def cut(prompt: str, inputs: dict[str, bytes]) -> Research:
        return Research(text="Partial analysis", status="incomplete", incomplete_reason="max_output_tokens")

    with SimDeepResearch(research=cut) as sim:
        proc = run_cli(*run_args(packages, tmp_path / "cut"), env=env(sim))
        assert proc.returncode == 0, proc.stderr
    [ep] = RunStore(tmp_path / "cut", create=False).episodes()
    assert ep.status == "limit" and ep.error is not None and "incomplete (max_output_tokens)" in ep.error
    assert isinstance(ep.submission, DeliverableSubmission)
    assert ep.submission.response == "Partial analysis" and ep.submission.stop == "round_limit"


def test_the_simulator_refuses_what_the_api_refuses(tmp_path: Path) -> None:
    with SimDeepResearch(research=lambda p, i: Research(text="x")) as sim:
        api = openai.OpenAI(base_url=sim.base_url, api_key=sim.api_key, max_retries=0)
        web = {"type": "web_search_preview"}

        def refused(exc: type[openai.APIStatusError], **kwargs: Any) -> dict[str, Any]:
            with pytest.raises(exc) as caught:
                api.responses.create(**{"model": "o3-deep-research", "input": "q", "background": True,
                                        "tools": [web], **kwargs})
            body = caught.value.body
            assert isinstance(body, dict)
            return body

        assert refused(openai.BadRequestError, tools=[])["message"].startswith("Deep research models require")
        assert refused(openai.BadRequestError, temperature=0.2)["code"] == "unsupported_parameter"
        assert refused(openai.BadRequestError, extra_body={"foo": 1})["message"] == "Unknown parameter: 'foo'."
        assert refused(openai.BadRequestError, model="gpt-4o")["code"] == "model_not_found"
        assert refused(openai.BadRequestError, reasoning={"effort": "high"})["code"] == "unsupported_value"
        assert refused(openai.BadRequestError, store=False)["param"] == "store"
        assert refused(openai.NotFoundError, tools=[web, {"type": "code_interpreter", "container": {
            "type": "auto", "file_ids": ["file-nope"]}}])["message"] == "No such File object: file-nope"
        batch = api.files.create(file=("a.jsonl", b"{}"), purpose="batch")
        assert "purpose 'batch'" in refused(openai.BadRequestError, tools=[web, {"type": "code_interpreter", "container": {
            "type": "auto", "file_ids": [batch.id]}}])["message"]
        assert refused(openai.BadRequestError, tools=[web, {"type": "code_interpreter", "container": {
            "type": "auto", "files": []}}])["code"] == "unknown_parameter"
        with pytest.raises(openai.NotFoundError):
            api.responses.retrieve("resp_nope")
        with pytest.raises(openai.NotFoundError):
            api.containers.files.list("cntr_nope")
        with pytest.raises(openai.AuthenticationError) as bad_key:
            openai.OpenAI(base_url=sim.base_url, api_key="sk-wrong", max_retries=0).responses.retrieve("resp_x")
        assert bad_key.value.code == "invalid_api_key"
        # what the agent sends is accepted, and a background response goes queued -> in_progress -> completed
        made = api.responses.create(model="o3-deep-research", input="q", background=True, tools=[web])
        statuses = [made.status] + [api.responses.retrieve(made.id).status for _ in range(3)]
        assert statuses == ["queued", "queued", "in_progress", "completed"]
        # a search's sources and a code run's outputs only when `include` asks for them
        sim.research = lambda p, i: Research(text="x", searches=[("q", ["https://a.example/"])])
        made = api.responses.create(model="o3-deep-research", input="q", background=True, tools=[web, {
            "type": "code_interpreter", "container": {"type": "auto"}}])
        for _ in range(3):
            api.responses.retrieve(made.id)
        plain = api.responses.retrieve(made.id).to_dict()["output"]
        full = api.responses.retrieve(made.id, include=openai_dr.INCLUDE).to_dict()["output"]
        [search] = [i for i in plain if i["type"] == "web_search_call"]
        [run] = [i for i in plain if i["type"] == "code_interpreter_call"]
        assert "sources" not in search["action"] and run["outputs"] is None
        assert [i["action"]["sources"] for i in full if i["type"] == "web_search_call"] == [
            [{"type": "url", "url": "https://a.example/"}]]
        with pytest.raises(openai.BadRequestError):
            api.responses.retrieve(made.id, include=["web_search_call.everything"])
