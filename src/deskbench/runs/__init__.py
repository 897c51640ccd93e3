"""Run store: episodes, trajectories and usage in one SQLite file per run; resume; merge-on-write."""
