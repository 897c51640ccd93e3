"""tracks.deliverables.generate."""
