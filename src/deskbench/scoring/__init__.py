"""Scoring: pure metric functions for answers, attribution, calibration and judge bias."""
