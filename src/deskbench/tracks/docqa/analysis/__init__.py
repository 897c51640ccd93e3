"""docqa's analyses (the MADQA appendix and the item analyses `deskbench analyse` runs)."""
