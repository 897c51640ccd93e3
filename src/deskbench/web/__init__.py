"""The people part of deskbench: a FastAPI app, server-rendered, every asset served by itself.

`deskbench serve` runs it; `create_app` builds it. The docqa human baseline (MADQA Appendix C.2)
lives here: annotators search with the agents' engine, view pages, cite and answer, and every
action is logged in the run store so a person is scored like any other system.
"""
