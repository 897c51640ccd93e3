"""tracks.docqa.agents."""
