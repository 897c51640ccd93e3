"""The people part of deskbench: FastAPI apps, server-rendered, every asset served by itself.

What every app shares lives here: the login, sessions and CSRF rule (common.py, store.py), corpus
page images (images.py), judge calibration (calibration.py) and the episode viewer (viewer*.py,
`deskbench view`), which shows each track through its `viewer_views` hook. A track's own screens
for people live in its folder (docqa's human baseline: tracks/docqa/web; deliverables' rubric
grading: tracks/deliverables/web) and `deskbench serve` reaches them through `web_screens`.
"""
