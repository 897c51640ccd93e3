"""Judge calibration screens (issue 9 item 3), on when `deskbench serve ... --calibration ITEMS`.

ITEMS is the --output file of `deskbench calibrate sample --judge MODEL`. A logged-in person sees one
item at a time: the question, the gold answer variants and the prediction (escaped), never the
judge's verdict, reason or name, nor the system (a labeller must not be anchored), and labels it
correct or incorrect: one click is one POST with the session's CSRF token. An item of a track
with its own view is shown as its track says (WebScreens.calibration_item: analytics' instruction,
reference answer, key points or chart rubric, the chart image or links to the output and
reference files, in tracks/analytics/web); the chart and files are served here for any track.

Storage: every click appends one HumanLabel line (item_id, labeller = the user name, label,
timestamp) to RUNDIR/calibration-labels.jsonl at once (flushed and fsynced), so the file is
exactly what `deskbench calibrate compute ITEMS RUNDIR/calibration-labels.jsonl` reads. A
relabel appends a newer line; the latest label of a labeller wins (resolve_labels).

GET /calibration                 progress and the list of items (labelled or not, by this user)
GET /calibration/{n}             item n (1-based) with the two buttons
GET /calibration/{n}/chart       an item with a chart (analytics visualization): the image the judge saw
GET /calibration/{n}/file/{which}  an item with files (analytics file generation): the output or the reference file
POST /calibration/{n}/label      label=correct|partial|incorrect (partial: items without a
                                 category, on the judge's three-way scale, MADQA F.1), csrf; then the next unlabelled item
GET /calibration/results         q1, q0, m1, m0, tp, fn, tn, fp via calibration_of (?scope=mine|all)
GET /calibration/results.json    the calibration JSON, byte-for-byte what
                                 `deskbench calibrate compute --json` prints (?scope=mine|all),
                                 as a download for `deskbench score --judge-calibration FILE`
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from deskbench.errors import UserError, is_one_of
from deskbench.scoring.judge_calibration import (
    LABELS,
    CalibrationItem,
    HumanLabel,
    calibration_json,
    calibration_of,
    read_items,
    read_labels,
)
from deskbench.web.images import png_or_jpeg
from deskbench.web.params import Position
from deskbench.web.store import Session

LABELS_FILE = "calibration-labels.jsonl"


class LabelFile:
    """The labels JSONL under the run directory: appended one line per click, read whole."""

    def __init__(self, path: Path, items: list[CalibrationItem]) -> None:
        self.path, self.items = path, items
        self._lock = threading.Lock()
        if path.exists():
            read_labels(path, items)  # a labels file of another sample is an error now, not later

    def add(self, label: HumanLabel) -> None:
        line = label.model_dump_json() + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def all(self) -> list[HumanLabel]:
        with self._lock:
            return read_labels(self.path, self.items) if self.path.exists() else []

    def latest(self, labeller: str) -> dict[str, str]:
        """item id -> this labeller's latest label."""
        out: dict[str, tuple[Any, str]] = {}
        for lab in self.all():
            if lab.labeller == labeller and (lab.item_id not in out or lab.timestamp >= out[lab.item_id][0]):
                out[lab.item_id] = (lab.timestamp, lab.label)
        return {k: v[1] for k, v in out.items()}


def mount(app: FastAPI, items_path: Path, run_dir: Path, *, render: Callable[..., HTMLResponse],
          session: Callable[[Request], Session],
          posted: Callable[[Request], Awaitable[tuple[Session, dict[str, str]]]], home: bool = False) -> None:
    """Add the calibration routes to `app` (helpers from create_app: render, session, posted);
    with `home`, the item list is also the app's "/" (the calibration-only app)."""
    items = read_items(Path(items_path))
    if not items:
        raise UserError(f"{items_path} holds no items; write them with 'deskbench calibrate sample'")
    if all(i.verdict_source is None for i in items):
        raise UserError(f"{items_path}: no item carries a judge verdict; sample again with --judge MODEL")
    labels = LabelFile(Path(run_dir) / LABELS_FILE, items)
    app.state.calibration_labels = labels

    def item_at(n: int) -> CalibrationItem:
        if not 1 <= n <= len(items):
            raise HTTPException(404, "no such item")
        return items[n - 1]

    def scoped(request: Request, s: Session) -> tuple[str, list[HumanLabel]]:
        scope = request.query_params.get("scope", "mine")
        if scope not in ("mine", "all"):
            raise HTTPException(400, "scope is mine or all")
        every = labels.all()
        return scope, every if scope == "all" else [lab for lab in every if lab.labeller == s.user]

    @app.get("/calibration", response_class=HTMLResponse)
    def cal_list(request: Request) -> HTMLResponse:
        s = session(request)
        mine = labels.latest(s.user)
        rows = [{"n": n, "question": i.question, "label": mine.get(i.id)} for n, i in enumerate(items, 1)]
        first = next((r["n"] for r in rows if r["label"] is None), None)
        return render("calibration.html", user=s.user, csrf=s.csrf, rows=rows, done=len(mine),
                      total=len(items), first=first)

    if home:
        app.get("/", response_class=HTMLResponse)(cal_list)

    @app.get("/calibration/results", response_class=HTMLResponse)
    def cal_results(request: Request) -> HTMLResponse:
        s = session(request)
        scope, chosen = scoped(request, s)
        cal = calibration_of(items, chosen)
        return render("calibration_results.html", user=s.user, csrf=s.csrf, cal=cal, scope=scope,
                      total=len(items), done=len(labels.latest(s.user)))

    @app.get("/calibration/results.json")
    def cal_json(request: Request) -> Response:
        s = session(request)
        scope, chosen = scoped(request, s)
        body = calibration_json(calibration_of(items, chosen)) + "\n"  # as `print` writes it
        name = f"calibration-{s.user if scope == 'mine' else 'all'}.json"
        return Response(body, media_type="application/json",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @app.get("/calibration/{n}", response_class=HTMLResponse)
    def cal_item(request: Request, n: Position) -> HTMLResponse:
        s = session(request)
        item = item_at(n)
        mine = labels.latest(s.user)
        # only what a labeller may see: never judge_verdict, verdict_source, judge, judge_reason, system,
        # judge_score, chart_correctness (the track's view says the same: contract/web.py)
        shown = {"question": item.question, "answer_variants": item.answer_variants, "prediction": item.prediction}
        return render("calibration_item.html", user=s.user, csrf=s.csrf, n=n, total=len(items), item=shown,
                      body=track_view(item, n), current=mine.get(item.id), done=len(mine),
                      three_way=item.category is None,  # the judge's correct / partial / incorrect scale
                      prev_n=n - 1 if n > 1 else None, next_n=n + 1 if n < len(items) else None)

    @app.get("/calibration/{n}/chart")
    def cal_chart(request: Request, n: Position) -> Response:
        session(request)
        item = item_at(n)
        try:
            data = Path(item.chart_path).read_bytes() if item.chart_path else None
        except OSError:
            data = None
        mime = png_or_jpeg(data) if data else None
        if data is None or mime is None:
            raise HTTPException(404, "no chart image for this item")
        return Response(data, media_type=mime, headers={"Cache-Control": "no-store"})

    @app.get("/calibration/{n}/file/{which}")
    def cal_file(request: Request, n: Position, which: str) -> Response:
        session(request)
        item = item_at(n)
        path = {"output": item.output_file, "reference": item.reference_file}.get(which)
        if path is None or not Path(path).is_file():
            raise HTTPException(404, "no such file for this item")
        name = f"{which}-{Path(path).name}"  # two files may share a name
        return FileResponse(path, filename=name, media_type="application/octet-stream")

    @app.post("/calibration/{n}/label")
    async def cal_label(request: Request, n: Position) -> Response:
        s, data = await posted(request)
        item = item_at(n)
        label = data.get("label", "")
        if not is_one_of(label, LABELS) or (label == "partial" and item.category is not None):
            raise HTTPException(400, "label is correct, partial (items without a category) or incorrect")
        labels.add(HumanLabel(item_id=item.id, labeller=s.user, label=label))
        mine = labels.latest(s.user)
        order = list(range(n + 1, len(items) + 1)) + list(range(1, n))
        nxt = next((k for k in order if items[k - 1].id not in mine), None)
        return RedirectResponse(f"/calibration/{nxt}" if nxt else "/calibration/results", status_code=303)


def track_view(item: CalibrationItem, n: int) -> Markup | None:
    """Item `n` as its track shows it to a labeller (WebScreens.calibration_item: analytics' in its
    folder), None for the core's view: the question, the gold answer variants, the prediction."""
    from deskbench.contract.registry import tracks

    track = tracks().get(item.track)
    screens = track.web_screens() if track is not None else None
    html = screens.calibration_item(item, n) if screens is not None else None
    return Markup(html) if html is not None else None  # rendered by the track's autoescaped template


def create_calibration_app(run_dir: Path | str, items_path: Path | str) -> FastAPI:
    """The labelling screens alone (`deskbench serve --out RUNDIR --calibration ITEMS`): the items
    carry question, gold variants and prediction, so no corpus or task file is needed."""
    from deskbench.web.common import install_basics, templates
    from deskbench.web.store import WebStore

    root = Path(run_dir)
    web = WebStore(root)
    env = templates()
    app = FastAPI(title="deskbench calibration", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.web = web

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(oracle=False, **ctx), status_code=status)

    access = install_basics(app, web, render)
    mount(app, Path(items_path), root, render=render, session=access.session, posted=access.posted, home=True)
    return app
