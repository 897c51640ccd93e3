"""The contract between the core and the tracks (track.py) and the registry of tracks (registry.py)."""
