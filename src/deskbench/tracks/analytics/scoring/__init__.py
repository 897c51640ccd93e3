"""tracks.analytics.scoring."""
