"""tracks.deliverables.scoring."""
