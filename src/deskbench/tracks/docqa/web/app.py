"""`create_app(corpus_dir, tasks_file, run_dir)`: the docqa human baseline (MADQA Appendix C.2).

Screens are rendered on the server (Jinja2); the only assets are static/app.css and app.js, served
from a fixed table (no path reaches the filesystem). Every POST carries the session's CSRF token.
Annotators see only the batches assigned to them (web/batches.py; `deskbench serve batches |
assign`); tasks of the served file that are in no batch yet are cut into batches of 25 at start.
Every action (search, page view, citation, answer) is written at once to the run directory's
SQLite (web_work + web_actions); submit records the finished Episode in the run store as system
`human:<name>` (or `human-oracle:<name>` with oracle=True: the gold evidence pages replace search).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import TypeAdapter

from deskbench.corpus import Corpus
from deskbench.errors import QuerySyntaxError, UserError
from deskbench.models.types import Usage as RunUsage
from deskbench.runs.store import Episode, RunStore, now
from deskbench.tasks.trajectory import AnswerStep, Citation, TrajectoryStep, Usage
from deskbench.tracks.docqa.humans import human_system
from deskbench.tracks.docqa.tasks import DocQASubmission, DocQATask, read_tasks
from deskbench.web.common import install_basics, templates
from deskbench.web.images import page_png, safe_doc_id
from deskbench.web.params import Position, whole_number
from deskbench.web.store import Session, WebStore

_STEPS = TypeAdapter(list[TrajectoryStep])


def _seconds(a: str, b: str) -> float:
    return max(0.0, (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds())


def create_app(corpus_dir: Path | str, tasks_file: Path | str, run_dir: Path | str, *,
               oracle: bool = False, top_k: int = 5, calibration: Path | str | None = None,
               batch_size: int = 25) -> FastAPI:
    corpus_root = Path(corpus_dir).resolve()
    corpus = Corpus.open(corpus_root)
    tasks: list[DocQATask] = read_tasks(Path(tasks_file)).items
    if not tasks:
        raise UserError(f"{tasks_file} holds no docqa tasks")
    run = RunStore(Path(run_dir))
    run.save_tasks(tasks)
    web = WebStore(Path(run_dir))
    web.add_batches([t.id for t in tasks], batch_size)
    index = {t.id: n for n, t in enumerate(tasks, 1)}
    env = templates(Path(__file__).resolve().parent / "templates")
    app = FastAPI(title="deskbench", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.corpus, app.state.run, app.state.web = corpus, run, web

    # -- helpers --------------------------------------------------------------------------

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(oracle=oracle, **ctx), status_code=status)

    access = install_basics(app, web, render)
    session, posted = access.session, access.posted

    def my_batches(user: str) -> list[tuple[str, list[int]]]:
        """The user's batches as (name, question numbers), questions of the served file only."""
        return [(b.name, [index[t] for t in b.task_ids if t in index]) for b in web.batches_of(user)]

    def task_at(s: Session, n: int) -> tuple[DocQATask, str, list[int]]:
        """Question n with its batch; a question outside the user's batches does not exist for them."""
        for name, numbers in my_batches(s.user):
            if n in numbers:
                return tasks[n - 1], name, numbers
        raise HTTPException(404, "no such question in your batches")

    def submitted(system: str) -> set[str]:
        return {t for t, a in run.done(system) if a == 0}

    def fresh_state(task: DocQATask) -> dict[str, Any]:
        state: dict[str, Any] = {"started_at": now(), "query": "", "results": [], "error": None,
                                 "viewer": None, "citations": [], "draft": "", "searches": [],
                                 "submitted": False}
        if oracle:
            state["results"] = [{"document": e.document, "page": e.page, "snippet": ""} for e in task.evidence]
        return state

    def load(system: str, task: DocQATask) -> dict[str, Any]:
        state = web.state(system, task.id)
        if state is None:
            state = fresh_state(task)
            web.save(system, task.id, state)
        return state

    def open_work(request: Request, s: Session, n: int) -> tuple[DocQATask, str, dict[str, Any]]:
        task = task_at(s, n)[0]
        system = human_system(s.user, oracle)
        state = load(system, task)
        if state["submitted"] or task.id in submitted(system):
            raise HTTPException(409, "this question is already submitted")
        return task, system, state

    def page_ref(data: dict[str, str]) -> tuple[str, int]:
        doc = data.get("document", "")
        if not safe_doc_id(doc):
            raise HTTPException(400, "bad document id")
        record = corpus.store.document(doc)
        if record is None:
            raise HTTPException(404, "no such document")
        page = whole_number(data.get("page", ""), "page")
        return doc, min(max(page, 1), record.page_count)

    def back(n: int) -> RedirectResponse:
        return RedirectResponse(f"/q/{n}", status_code=303)

    # -- screens --------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    def question_list(request: Request) -> HTMLResponse:
        s = session(request)
        system = human_system(s.user, oracle)
        done = submitted(system)
        groups: list[dict[str, Any]] = []
        for name, numbers in my_batches(s.user):
            rows: list[dict[str, Any]] = []
            for n in numbers:
                t = tasks[n - 1]
                status = "done" if t.id in done else ("started" if web.state(system, t.id) else "todo")
                rows.append({"n": n, "id": t.id, "question": t.question, "status": status})
            groups.append({"name": name, "rows": rows, "done": sum(r["status"] == "done" for r in rows)})
        return render("tasks.html", groups=groups, user=s.user, csrf=s.csrf,
                      done=sum(g["done"] for g in groups), total=sum(len(g["rows"]) for g in groups))

    @app.get("/q/{n}", response_class=HTMLResponse)
    def question(request: Request, n: Position) -> HTMLResponse:
        s = session(request)
        task, batch, numbers = task_at(s, n)
        system = human_system(s.user, oracle)
        state = load(system, task)
        done = submitted(system)
        viewer = None
        if state["viewer"]:
            doc, page = state["viewer"]
            record = corpus.store.document(doc)
            if record is not None:
                viewer = {"document": doc, "page": page, "pages": record.page_count,
                          "cited": [doc, page] in state["citations"]}
        episode = None
        if task.id in done:
            episode = next((e for e in run.episodes(system) if e.task_id == task.id and e.attempt == 0), None)
        everything = [m for _, ns in my_batches(s.user) for m in ns]
        later = everything[everything.index(n) + 1:]
        return render("question.html", user=s.user, csrf=s.csrf, n=n, task=task, batch=batch,
                      position=numbers.index(n) + 1, total=len(numbers),
                      state=state, viewer=viewer, submitted=task.id in done, episode=episode,
                      done=sum(tasks[m - 1].id in done for m in numbers),
                      next_n=next((m for m in later if tasks[m - 1].id not in done), later[0] if later else None))

    # -- actions: each one saved at once --------------------------------------------------

    @app.post("/q/{n}/search")
    async def search(request: Request, n: Position) -> Response:
        s, data = await posted(request)
        if oracle:
            raise HTTPException(404, "oracle mode shows the evidence pages; there is no search")
        task, system, state = open_work(request, s, n)
        query = data.get("query", "").strip()[:500]
        if not query:
            return back(n)
        start = time.monotonic()
        result: dict[str, Any]
        try:
            hits = corpus.search(query, k=top_k, strict=True)  # a person reads the message
            state["results"] = [{"document": h.document, "page": h.page, "snippet": h.snippet} for h in hits]
            state["error"] = None
            result = {"pages": [[h.document, h.page] for h in hits]}
        except QuerySyntaxError as exc:
            state["results"], state["error"] = [], str(exc)
            result = {"pages": [], "error": str(exc)}
        state["query"] = query
        state["searches"].append(query)
        step = {"kind": "tool_call", "name": "search_documents", "arguments": {"query": query},
                "result": result, "seconds": round(time.monotonic() - start, 4)}
        web.save(system, task.id, state, step)
        return back(n)

    @app.post("/q/{n}/view")
    async def view(request: Request, n: Position) -> Response:
        s, data = await posted(request)
        task, system, state = open_work(request, s, n)
        doc, page = page_ref(data)
        state["viewer"] = [doc, page]
        web.save(system, task.id, state, {"kind": "page_view", "document": doc, "page": page})
        return back(n)

    @app.post("/q/{n}/cite")
    async def cite(request: Request, n: Position) -> Response:
        s, data = await posted(request)
        task, system, state = open_work(request, s, n)
        doc, page = page_ref(data)
        ref = [doc, page]
        if data.get("op") == "remove":
            if ref in state["citations"]:
                state["citations"].remove(ref)
                web.save(system, task.id, state, {"kind": "citation_removed", "document": doc, "page": page})
        elif ref not in state["citations"]:
            state["citations"].append(ref)
            web.save(system, task.id, state, {"kind": "citation_added", "document": doc, "page": page})
        return back(n)

    @app.post("/q/{n}/draft")
    async def draft(request: Request, n: Position) -> Response:
        s, data = await posted(request)
        task, system, state = open_work(request, s, n)
        state["draft"] = data.get("answer", "")[:20_000]
        web.save(system, task.id, state)
        return Response(status_code=204) if request.headers.get("x-deskbench") == "autosave" else back(n)

    @app.post("/q/{n}/submit")
    async def submit(request: Request, n: Position) -> Response:
        s, data = await posted(request)
        task, system, state = open_work(request, s, n)
        text = data.get("answer", "")[:20_000]
        state["draft"] = text
        answer = [line.strip() for line in text.splitlines() if line.strip()]
        if not answer:
            state["error"] = "Write an answer (one item per line) before submitting."
            web.save(system, task.id, state)
            return back(n)
        citations = [Citation(document=d, page=p) for d, p in state["citations"]]
        state["submitted"] = True
        at = web.save(system, task.id, state, AnswerStep(answer=answer, citations=citations).model_dump())
        actions = web.actions(system, task.id)
        steps = []
        for i, (when, step) in enumerate(actions):
            if step["kind"] == "page_view":  # dwell: until the next action
                step = {**step, "seconds": round(_seconds(when, actions[i + 1][0]), 3) if i + 1 < len(actions) else 0.0}
            steps.append({**step, "at": when})  # the moment the action was saved
        trajectory = _STEPS.validate_python(steps)
        seconds = round(_seconds(state["started_at"], at), 3)
        submission = DocQASubmission(
            id=task.id, question=task.question, answer=answer, citations=citations,
            search_history=list(state["searches"]), iterations=len(state["searches"]),
            usage=Usage(seconds=seconds))
        run.record(Episode(task_id=task.id, system=system, status="ok", submission=submission,
                           trajectory=trajectory, usage=RunUsage(seconds=seconds),
                           started_at=state["started_at"], finished_at=at))
        return back(n)

    # -- page images: by (document id, page number) only ----------------------------------

    @app.get("/page-image")
    def page_image(request: Request, doc: str = "", page: str = "1", size: str = "thumb") -> Response:
        session(request)
        number = whole_number(page, "page", low=1)
        return page_png(corpus, doc, number, size)

    if calibration is not None:  # judge calibration screens: web/calibration.py
        from deskbench.web.calibration import mount
        mount(app, Path(calibration), Path(run_dir), render=render, session=session, posted=posted)
    return app
