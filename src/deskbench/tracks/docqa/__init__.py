"""tracks.docqa."""
