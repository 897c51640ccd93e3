"""`create_grading_app(run_dir)`: rubric grading and QC of a deliverables run (issue 9 item 2).

A grader sees the task prompt, the response, the produced files (their text, and a download
served only by (episode, file name) looked up in the submission's file list) and the verifier
results, and scores DI/AR/RF/EP/FD 0-3, each with a justification, with the Table 19 anchors on
screen; the grade is a RubricGrade(source="human", grader=<user>) in the GradeStore. A QC
reviewer (not the grader) confirms or edits each cell (a criterion, or a verifier outcome: set
to pass or fail with a reason, target "verifier:<id>", which V and `deskbench score` then use), or
rejects (returns) the row, and records the six C.6 star ratings (1-5; never a score); each action
is a QCAction (validated with qc_problem; a reviewer who is the grader is refused by
rubric_qc_actions.self_review, the CSV import's rule too) and the final grade (apply_qc) is shown, with
why it was returned (by the reviewer, or by a C.1 trigger). The Appendix C checks' findings
(rubric_qc_checks.py) are on the screen: the C.2 verifiers to re-derive are marked in the
verifier table (the row stays pending until each is confirmed or edited); C.3, C.4 A-C findings
are listed with what QC did about each, and a proposed action is one click (a verifier edit, a
reject) or a prefilled edit form (a criterion: the reviewer writes the justification). The grading form also records the
grader's declared best response of a task (§4.4, compared with the VRS argmax by `deskbench score`),
and shows the episode's response number, the "Response N" a comment may name instead (rubric_best.py). Each QC form carries the grade it shows (its grader and created_at):
the action is bound to that grade, and a post whose grade is no longer the episode's primary
grade (a regrade meanwhile) is refused with a 409 page and nothing is stored. A QC screen reads
and verifies its one episode (GradeStore.final_grade), not the whole system.
Login, sessions and CSRF are every deskbench web app's (web/common.py: WebStore tokens; every POST carries the token).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from deskbench.errors import UserError
from deskbench.runs.outputs import episode_outputs, output_file
from deskbench.runs.store import Episode, RunStore
from deskbench.tracks.deliverables.grades import GradeStore, StaleQC, primary_of
from deskbench.tracks.deliverables.scoring.rubric import CriterionGrade, RubricGrade
from deskbench.tracks.deliverables.scoring.rubric_best import number_of, numbering
from deskbench.tracks.deliverables.scoring.rubric_qc_actions import (
    STAR_TARGETS,
    QCAction,
    qc_action,
    qc_problem,
    self_review,
)
from deskbench.tracks.deliverables.scoring.rubric_score0 import score0_mismatches
from deskbench.tracks.deliverables.tasks import RUBRIC_CODES, DeliverableSubmission, DeliverableTask
from deskbench.web.common import install_basics, templates
from deskbench.web.images import image_type
from deskbench.web.params import parse_number, whole_number
from deskbench.web.store import Session, WebStore

FILE_TEXT_CAP = 20_000
APP_NAME = "rubric grading and QC"  # the header of every page, the login page's too
Key = tuple[str, str, int]


def create_grading_app(run_dir: Path | str) -> FastAPI:
    root = Path(run_dir).resolve()
    runs = RunStore(root, create=False)
    if runs.track() != "deliverables":
        raise UserError(f"{root} is a {runs.track()} run; rubric grading needs a deliverables run")
    grades = GradeStore(root)
    web = WebStore(root)
    env = templates(Path(__file__).resolve().parent / "templates")
    app = FastAPI(title="deskbench grading", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.grades, app.state.web = grades, web

    # -- helpers --------------------------------------------------------------------------

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(oracle=False, app_name=APP_NAME, **ctx), status_code=status)

    access = install_basics(app, web, render)
    session, posted = access.session, access.posted

    def gradable() -> dict[Key, Episode]:
        return {k: e for k, e in sorted(grades.episodes().items())
                if e.status == "ok" and isinstance(e.submission, DeliverableSubmission)}

    def episode_of(data: dict[str, str]) -> tuple[Key, Episode, DeliverableSubmission, DeliverableTask]:
        key = (data.get("task", ""), data.get("system", ""), whole_number(data.get("attempt", "0"), "attempt"))
        ep = gradable().get(key)
        task = grades.tasks().get(key[0])
        if ep is None or task is None:
            raise HTTPException(404, "no such episode to grade")
        assert isinstance(ep.submission, DeliverableSubmission)
        return key, ep, ep.submission, task

    def query(key: Key) -> str:
        return urlencode({"task": key[0], "system": key[1], "attempt": key[2]})

    def files_dir(ep: Episode) -> Path | None:
        """The submission's files folder, only when it resolves inside the episode's own folder."""
        return episode_outputs(root, ep)

    def contained_file(ep: Episode, name: str) -> Path | None:
        """A produced file by the name the submission lists; resolved (symlinks too) inside the episode's folder."""
        sub = ep.submission
        if not isinstance(sub, DeliverableSubmission) or name not in {f.name for f in sub.files}:
            return None
        return output_file(files_dir(ep), name)

    def file_views(ep: Episode) -> list[dict[str, Any]]:
        from deskbench.tracks.deliverables.scoring.office import UnreadableFile, read_output

        out = []
        assert isinstance(ep.submission, DeliverableSubmission)
        for rec in ep.submission.files:
            path = contained_file(ep, rec.name)
            image = path is not None and image_type(path) is not None
            text, ok = "", path is not None
            if path is None:
                text = "(file recorded but not found in the run directory)"
            elif not image:
                try:
                    text = read_output(path).text or "(the file opens but holds no text)"
                except UnreadableFile as exc:
                    text = f"(the file does not open: {exc})"
            if len(text) > FILE_TEXT_CAP:
                text = text[:FILE_TEXT_CAP] + f"\n[... cut at {FILE_TEXT_CAP} characters; download the file]"
            out.append({"name": rec.name, "size": rec.size, "text": text, "ok": ok, "image": image})
        return out

    def verifier_results(task: DeliverableTask, ep: Episode) -> list[Any]:
        from deskbench.tracks.deliverables.scoring.verifiers import run_verifiers

        assert isinstance(ep.submission, DeliverableSubmission)
        return run_verifiers(task.verifiers, ep.submission.response, files_dir(ep))

    def my_grade(key: Key, user: str, stamp: str) -> RubricGrade | None:
        mine = [g for g in grades.grades(key[1], user, key=key) if g.source == "human" and g.episode_stamp == stamp]
        return mine[-1] if mine else None

    def anchors(task: DeliverableTask) -> list[dict[str, Any]]:
        by = {c.code: c for c in task.rubric}
        return [{"code": c, "name": by[c].name, "anchors": [by[c].anchors[i] for i in range(4)]}
                for c in RUBRIC_CODES]

    # -- screens --------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    def episode_list(request: Request) -> HTMLResponse:
        s = session(request)
        current, _ = grades.current_grades()  # oldest first
        mine = {g.key for g in current if g.grader == s.user}
        by_key: dict[Key, list[RubricGrade]] = {}
        for g in current:
            by_key.setdefault(g.key, []).append(g)
        primary = {k: primary_of(gs) for k, gs in by_key.items()}
        qc: dict[Key, list[QCAction]] = {}
        for a in grades.resolved_qc(current=current):
            qc.setdefault(a.key, []).append(a)
        rows = []
        for key in gradable():
            status = "graded" if key in mine else "todo"
            grade = primary.get(key)
            if grade is None:
                qc_state = "no grade yet"
            elif any(a.reviews(grade) for a in qc.get(key, [])):
                qc_state = "QC started"
            else:
                qc_state = "awaiting QC" + (" (earlier QC is stale: regraded)" if key in qc else "")
            rows.append({"key": key, "q": query(key), "status": status, "qc": qc_state,
                         "grader": grade.grader if grade else "",
                         "qc_ok": grade is not None and self_review(s.user, grade.grader) is None})
        return render("grading_list.html", user=s.user, csrf=s.csrf, rows=rows,
                      done=sum(r["status"] == "graded" for r in rows))

    def grade_screen(s: Session, key: Key, ep: Episode, sub: DeliverableSubmission, task: DeliverableTask,
                     *, values: dict[str, str] | None = None, errors: list[str] | None = None,
                     status: int = 200, saved: bool = False) -> HTMLResponse:
        grade = my_grade(key, s.user, ep.finished_at)
        if values is None:
            values = {"comment": grade.comment if grade else "", "best": "yes" if grade and grade.declared_best else ""}
            for c in RUBRIC_CODES:
                values[f"score_{c}"] = str(grade.criteria[c].score) if grade else ""
                values[f"just_{c}"] = grade.criteria[c].justification if grade else ""
        warnings = [f"{m.code} is 0 but its justification describes score-1 behaviour "
                    f"({'; '.join(m.score1_wording)}); the score-1 anchor is: {m.anchor}"
                    for m in (score0_mismatches(grade, task.rubric) if grade else [])]
        # QC that reviewed this grade: an update makes it stale (the reviewer reviews the new grade)
        reviewed = sum(a.reviews(grade) for a in grades.resolved_qc(key[1], key=key)) if grade else 0
        response = number_of(key[1], numbering(grades.runs.systems()))
        return render("grading.html", status, user=s.user, csrf=s.csrf, key=key, q=query(key), task=task,
                      response=response,
                      episode=ep, sub=sub, files=file_views(ep), verifiers=verifier_results(task, ep),
                      criteria=anchors(task), values=values, errors=errors or [], warnings=warnings,
                      graded=grade is not None, saved=saved, reviewed=reviewed)

    @app.get("/grade", response_class=HTMLResponse)
    def grade_form(request: Request) -> HTMLResponse:
        s = session(request)
        key, ep, sub, task = episode_of(dict(request.query_params))
        return grade_screen(s, key, ep, sub, task, saved=request.query_params.get("saved") == "1")

    @app.post("/grade")
    async def grade_save(request: Request) -> Response:
        s, data = await posted(request)
        key, ep, sub, task = episode_of(data)
        if data.get("stamp") != ep.finished_at:
            raise HTTPException(409, "the episode was rerun since this form was opened; reload it")
        errors, cells = [], []
        for c in RUBRIC_CODES:
            raw, just = data.get(f"score_{c}", "").strip(), data.get(f"just_{c}", "").strip()[:5000]
            if raw not in ("0", "1", "2", "3"):
                errors.append(f"{c}: choose a score 0-3")
                continue
            if not just:  # every score needs one; the Score-0 rule above all
                errors.append(f"{c}: a score of {raw} needs a justification"
                              + (" (Score-0 rule: say what was fabricated, ignored or unusable)" if raw == "0" else ""))
                continue
            cells.append(CriterionGrade(code=c, score=int(raw), justification=just))
        if errors:
            return grade_screen(s, key, ep, sub, task, values=data, errors=errors, status=400)
        grades.save_grade(RubricGrade(task_id=key[0], system=key[1], attempt=key[2], grader=s.user,
                                      source="human", criteria={cell.code: cell for cell in cells},
                                      comment=data.get("comment", "").strip()[:5000],
                                      declared_best=data.get("best", "") == "yes",
                                      responses=numbering(grades.runs.systems()), episode_stamp=ep.finished_at))
        return RedirectResponse(f"/grade?{query(key)}&saved=1", status_code=303)

    @app.get("/file")
    def download(request: Request) -> Response:
        session(request)
        _, ep, _, _ = episode_of(dict(request.query_params))
        name = request.query_params.get("name", "")
        path = contained_file(ep, name)
        if path is None:
            raise HTTPException(404, "no such file in this submission")
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in Path(name).name) or "file"
        shown = image_type(path) if request.query_params.get("inline") == "1" else None
        if shown is not None:  # a chart on the grading screen: a decoded raster image only, never SVG
            return Response(path.read_bytes(), media_type=shown,
                            headers={"Content-Disposition": f'inline; filename="{safe}"'})
        return Response(path.read_bytes(), media_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{safe}"'})

    def qc_screen(s: Session, key: Key, ep: Episode, sub: DeliverableSubmission, task: DeliverableTask,
                  *, error: str = "", status: int = 200) -> HTMLResponse:
        """One episode only: its grades, its QC log, its verifiers (run once)."""
        current, _ = grades.current_grades(key[1], key=key)
        actions = grades.resolved_qc(key[1], key=key, current=current)
        automatic = verifier_results(task, ep)
        final = grades.final_grade(key, episode=ep, verifier_results=automatic)
        # the grade shown (and bound by the forms) is the one the final grade was computed from
        grade = next((g for g in current if final is not None and (g.grader, g.created_at)
                      == (final.grader, final.graded_at)), None)
        # the latest action per target among those reviewing this grade (the ones apply_qc used)
        latest = {a.target: a for a in actions if grade is not None and a.reviews(grade)}
        verifiers = []
        if final is not None:
            finals = {r.id: r.status for r in final.verifiers or []}
            rederive = {f.target: f for f in final.checks if f.check == "C.2"}
            verifiers = [{"result": r, "final": finals.get(r.id, r.status), "qc": latest.get(f"verifier:{r.id}"),
                          "flip": "fail" if r.status == "pass" else "pass",
                          "priority": rederive.get(f"verifier:{r.id}")} for r in automatic]
        stale = {a.id for a in actions if grade is None or not a.reviews(grade)}
        return render("qc.html", status, user=s.user, csrf=s.csrf, key=key, q=query(key), task=task,
                      episode=ep, sub=sub, grade=grade, final=final, actions=actions, error=error,
                      latest=latest, verifiers=verifiers, criteria=anchors(task), stale=stale,
                      checks=[f for f in final.checks if f.check != "C.2"] if final is not None else [],
                      star_targets=STAR_TARGETS,
                      own=grade is not None and self_review(s.user, grade.grader) is not None)

    @app.get("/qc", response_class=HTMLResponse)
    def qc_form(request: Request) -> HTMLResponse:
        s = session(request)
        key, ep, sub, task = episode_of(dict(request.query_params))
        return qc_screen(s, key, ep, sub, task)

    @app.post("/qc")
    async def qc_save(request: Request) -> Response:
        s, data = await posted(request)
        key, ep, sub, task = episode_of(data)
        grade = grades.primary_grade(key)
        if grade is None:
            raise HTTPException(409, "this episode has no current grade to review")
        own = self_review(s.user, grade.grader)
        if own:
            return qc_screen(s, key, ep, sub, task, status=403, error=own)
        reviewed = (data.get("grader", ""), data.get("graded_at", ""))
        if reviewed != (grade.grader, grade.created_at):
            shown = (f"{reviewed[0]}'s grade of {reviewed[1]}" if all(reviewed)
                     else "no grade (the form names none; reload the page)")
            return qc_screen(s, key, ep, sub, task, status=409, error=(
                f"The grade changed since this page was opened: your action reviewed {shown}, the current grade "
                f"is {grade.grader}'s of {grade.created_at}. Nothing was recorded: review the current grade "
                "below and act again."))
        target, action = data.get("target", ""), data.get("action", "")
        ids = [v.id for v in task.verifiers]
        if target.startswith("verifier:") and target.removeprefix("verifier:") not in ids:
            return qc_screen(s, key, ep, sub, task, status=400,
                             error=f"{target}: task {key[0]} has no such verifier; use one of: {', '.join(ids)}")
        raw = data.get("score", "").strip()
        score = parse_number(raw) if raw else None
        if raw and score is None:
            return qc_screen(s, key, ep, sub, task, error="score: give a whole number", status=400)
        justification, reason = data.get("justification", "").strip()[:5000], data.get("reason", "").strip()[:500]
        problem = qc_problem(target, action, score, justification, reason)
        if problem:
            column, what, fix = problem
            return qc_screen(s, key, ep, sub, task, error=f"{target} {column}: {what}; {fix}", status=400)
        try:  # the grade is checked again in the write transaction (a regrade in between: refused)
            grades.add_qc([QCAction(task_id=key[0], system=key[1], attempt=key[2], target=target,
                                    action=qc_action(action), score=score, justification=justification,
                                    reason=reason, reviewer=s.user, grader=grade.grader,
                                    graded_at=grade.created_at)])
        except StaleQC as exc:
            return qc_screen(s, key, ep, sub, task, status=409, error=str(exc))
        return RedirectResponse(f"/qc?{query(key)}", status_code=303)

    return app

