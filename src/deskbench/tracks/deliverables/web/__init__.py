"""deliverables' web screens for people (Track.web_screens): rubric grading and QC of a
deliverables run, `deskbench serve --out RUNDIR` (grading.py)."""

from __future__ import annotations

from deskbench.contract.web import ServedApp, ServeRequest, WebScreens


class DeliverablesScreens(WebScreens):
    def app(self, request: ServeRequest) -> ServedApp | None:
        """Rubric grading, when a deliverables run directory is given alone (no corpus, no tasks)."""
        if request.out is None or request.corpus is not None or request.tasks is not None \
                or request.run_track != "deliverables":
            return None
        from deskbench.tracks.deliverables.web.grading import create_grading_app

        return ServedApp(app=create_grading_app(request.out), what="rubric grading")


SCREENS = DeliverablesScreens()
