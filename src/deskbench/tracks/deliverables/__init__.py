"""tracks.deliverables."""
