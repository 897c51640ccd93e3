"""tracks.analytics."""
