"""tracks.docqa.scoring."""
