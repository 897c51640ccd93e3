"""The tracks: docqa, analytics, deliverables, each an implementation of contract/registry.py's
`Track` protocol; a fourth registers itself with `register_track`."""
