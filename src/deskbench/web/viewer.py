"""`create_viewer_app(run_dirs, corpus_dir)`: the episode viewer (`deskbench view RUNDIR...`).

A table of every episode of the runs given (filters and sorting are query parameters, so the page
works without JavaScript), one page per episode (the task and its gold, the answer and its
citations, the score and what decided it, then the transcript step by step with the pages each
search returned as thumbnails, cited and gold pages marked; score-time judge calls; verifier and
rubric results), and two episodes of one task side by side.

The login, sessions and CSRF rule are every deskbench web app's (web/common.py), with the users
of the first run directory (`deskbench serve add-user NAME --out RUNDIR`). Nothing is written to
the runs but sessions. Scores are computed offline (web/viewer_scores.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from deskbench.corpus import Corpus
from deskbench.errors import UserError
from deskbench.models.prices import format_cost
from deskbench.runs.store import Episode, UnreadableTranscript
from deskbench.runs.transcript import TranscriptDoc, expand, recorded_corpus
from deskbench.web.common import install_basics, templates
from deskbench.web.images import image_type, page_png
from deskbench.web.params import parse_number, whole_number
from deskbench.web.store import WebStore
from deskbench.web.viewer_data import (
    OUTCOMES,
    PAGE_SIZE,
    SORTS,
    Catalog,
    TableQuery,
    ViewerRun,
    answer_view,
    failure,
    open_runs,
    output_file,
    task_view,
    why_no_model_calls,
    with_files,
)
from deskbench.web.viewer_transcript import Marks, judge_steps, steps

APP_NAME = "episode viewer"
IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
COLUMNS = (("run", "Run"), ("system", "System"), ("task", "Task"), ("attempt", "Attempt"), ("outcome", "Outcome"),
           ("score", "Score"), ("steps", "Steps"), ("tools", "Tool calls"), ("cost", "Cost"), ("hop", "Hop type"),
           ("error", "Error class"), ("scoring", "Scored by"))


def episode_id(run: str, system: str, attempt: int) -> str:
    """How the compare page names an episode of its task: run:attempt:system (run keys hold no ':')."""
    return f"{run}:{attempt}:{system}"


class Corpora:
    """The corpus a system's pages are read from: --corpus when given, else the one its run
    recorded (meta 'corpora'); each opened once and named by its position ("0", "1", ...), which
    is all a page-image URL carries, so no path from a request reaches the filesystem. None:
    pages are named, not shown."""

    def __init__(self, given: Path | None) -> None:
        self.given = given
        self._open: dict[Path, Corpus | None] = {}
        self._lock = threading.Lock()

    def of(self, run: ViewerRun, system: str) -> Corpus | None:
        root = self.given or recorded_corpus(run.store, system)
        if root is None:
            return None
        root = root.resolve()
        with self._lock:
            if root not in self._open:
                try:
                    self._open[root] = Corpus.open(root)
                except UserError:  # moved or deleted since the run: page texts show a marker, pages their names
                    self._open[root] = None
            return self._open[root]

    def key(self, corpus: Corpus | None) -> str:
        return "" if corpus is None else str(list(self._open.values()).index(corpus))

    def by_key(self, key: str) -> Corpus | None:
        opened = list(self._open.values())
        n = parse_number(key, high=len(opened) - 1)
        return opened[n] if n is not None else None


def create_viewer_app(run_dirs: Sequence[Path | str], corpus_dir: Path | str | None = None) -> FastAPI:
    runs = open_runs([Path(d) for d in run_dirs])
    catalog = Catalog(runs)
    given = Path(corpus_dir).resolve() if corpus_dir is not None else None
    if corpus_dir is not None:  # a typo names the corpora nearby; a run directory is named as one
        from deskbench.paths import require_corpus

        require_corpus(Path(corpus_dir), "--corpus")
    if given is not None and not given.is_dir():
        raise UserError(f"--corpus {corpus_dir} is not a directory; give the corpus the runs searched")
    corpora = Corpora(given)
    if given is not None and corpora.of(runs[0], "") is None:
        raise UserError(f"--corpus {corpus_dir} is not a deskbench corpus; give the directory 'deskbench ingest' made")
    web = WebStore(runs[0].dir)  # the users of the first run
    env = templates()
    env.globals.update(query=lambda **kw: "?" + urlencode({k: v for k, v in kw.items() if v not in (None, "")}),
                       money=lambda x: "?" if x is None else format_cost(x),
                       episode_id=episode_id)
    app = FastAPI(title="deskbench viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.catalog, app.state.web = catalog, web

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(oracle=False, app_name=APP_NAME, **ctx), status_code=status)

    access = install_basics(app, web, render)
    session = access.session

    def missing(s: Any, what: str) -> HTMLResponse:
        return render("viewer_missing.html", 404, user=s.user, csrf=s.csrf, what=what)

    def episode_context(run: ViewerRun, episode: Episode) -> dict[str, Any]:
        task = task_view(run.tasks.get(episode.task_id), run.views)
        answer = with_files(answer_view(episode.submission, run.views), run, episode)
        corpus = corpora.of(run, episode.system)
        marks = Marks(cited=set(answer.cited), gold=set(task.gold_pages), corpus=corpora.key(corpus),
                      run=run.key)
        unreadable: str | None = None  # a transcript that cannot be decoded: said, the rest shown
        try:
            doc = run.store.transcript(episode.task_id, episode.system, episode.attempt)
        except UnreadableTranscript as exc:
            doc, unreadable = None, f"The transcript cannot be read ({exc.episode.problem})."
        shown = steps(expand(doc, corpus), marks) if doc is not None else None
        no_calls = unreadable or why_no_model_calls(run, episode, doc)  # None: the transcript holds model calls
        try:
            judged: dict[str, TranscriptDoc] = run.store.judge_transcripts(episode.task_id, episode.system,
                                                                          episode.attempt)
        except UnreadableTranscript:
            judged = {}
        judges = judge_steps({k: expand(v, corpus) for k, v in judged.items()}, marks)
        others = [(r, e) for r, e in catalog.episodes_of_task(episode.task_id)
                  if (r.key, e.system, e.attempt) != (run.key, episode.system, episode.attempt)]
        return {"run": run, "ep": episode, "task": task, "answer": answer, "marks": marks,
                "score": catalog.episode_score(run, episode), "row": catalog.row(run, episode), "steps": shown,
                "judges": judges, "others": others, "corpus": corpus is not None,
                "failure": failure(episode, run), "no_calls": no_calls}

    @app.get("/", response_class=HTMLResponse)
    def table(request: Request) -> HTMLResponse:
        s = session(request)
        query = TableQuery.of(dict(request.query_params))
        every, unreadable = catalog.table_rows()  # a stored episode that cannot be read: a marked row
        rows = query.apply(every)
        pages = max(1, -(-len(rows) // PAGE_SIZE))
        page = min(query.page, pages)
        return render("viewer.html", user=s.user, csrf=s.csrf, q=query, rows=rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE],
                      n=len(rows), total=len(every), page=page, pages=pages, columns=COLUMNS, outcomes=OUTCOMES,
                      systems=sorted({r.system for r in every}), errors=sorted({r.error_class for r in every if r.error_class}),
                      runs=runs, sorts=SORTS, unreadable=unreadable)

    @app.get("/episode", response_class=HTMLResponse)
    def episode_page(request: Request, run: str = "", system: str = "", task: str = "", attempt: str = "0") -> HTMLResponse:
        s = session(request)
        number = whole_number(attempt, "attempt")
        found = catalog.episode(run, system, task, number)
        if found is None:
            broken = catalog.unreadable_episode(run, system, task, number)  # stored, but its row cannot be read
            return missing(s, f"episode {task!r} of {system!r} (attempt {attempt}) in run {run!r}"
                           + (f" that can be read: it is stored, but {broken.problem}" if broken is not None else ""))
        return render("viewer_episode.html", user=s.user, csrf=s.csrf, c=episode_context(*found))

    @app.get("/compare", response_class=HTMLResponse)
    def compare(request: Request, task: str = "", a: str = "", b: str = "") -> HTMLResponse:
        s = session(request)
        choices = catalog.episodes_of_task(task)
        if not choices:
            return missing(s, f"task {task!r}")
        ids = [episode_id(r.key, e.system, e.attempt) for r, e in choices]
        chosen = [a if a in ids else ids[0], b if b in ids else ids[min(1, len(ids) - 1)]]
        sides = [episode_context(*choices[ids.index(i)]) for i in chosen]
        return render("viewer_compare.html", user=s.user, csrf=s.csrf, task_id=task, ids=ids, chosen=chosen,
                      sides=sides)

    @app.get("/page-image")
    def page_image(request: Request, doc: str = "", page: str = "1", size: str = "thumb", corpus: str = "") -> Response:
        """A corpus page, rendered as the human baseline app renders it (by document id and page
        number only; the stored copy must resolve inside the corpus)."""
        session(request)
        number = whole_number(page, "page", low=1)
        opened = corpora.by_key(corpus)
        if opened is None:
            raise HTTPException(404, "no such corpus: start the viewer with --corpus DIR")
        return page_png(opened, doc, number, size)

    @app.get("/output")
    def output(request: Request, run: str = "", system: str = "", task: str = "", attempt: str = "0",
               n: str = "") -> Response:
        """An episode's output file by (run, system, task, attempt, its position in the submission's
        list): never a path from the request. A raster image that decodes as one is shown inline
        with its own media type; anything else (svg included) is a download."""
        session(request)
        number, position = whole_number(attempt, "attempt"), whole_number(n, "n (the file's position in the list)")
        found = catalog.episode(run, system, task, number)
        path = output_file(*found, position) if found is not None else None
        if path is None:
            raise HTTPException(404, "no such file")
        name = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in path.name) or "file"
        shown = image_type(path)
        if shown is not None and shown in IMAGE_MIMES:
            return FileResponse(path, media_type=shown, filename=name, content_disposition_type="inline",
                                headers={"Cache-Control": "private, max-age=3600"})
        return FileResponse(path, media_type="application/octet-stream", filename=name)

    @app.get("/blob")
    def blob(request: Request, run: str = "", sha: str = "") -> Response:
        """An image a transcript refers to by hash (not a corpus page); images only."""
        session(request)
        found = catalog.run(run)
        stored = found.store.blob(sha) if found is not None and len(sha) == 64 else None
        if stored is None or stored.mime not in IMAGE_MIMES:
            raise HTTPException(404, "no such image")
        return Response(stored.data, media_type=stored.mime, headers={"Cache-Control": "private, max-age=3600"})

    return app
