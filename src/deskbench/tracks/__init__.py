"""The tracks: docqa, analytics, deliverables, each an implementation of tracks/registry.py's
`Track` protocol; a fourth registers itself with `register_track`."""
