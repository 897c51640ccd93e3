"""Analysis: statistics over per-item scores (confidence intervals, bootstrap)."""
