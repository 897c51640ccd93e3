"""The docqa track's commands of `deskbench` (reached through Track.cli_commands in track.py)."""
