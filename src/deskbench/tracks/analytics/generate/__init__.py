"""tracks.analytics.generate."""
