"""The docqa HTML report: leaderboard, calibration and budget curves, error decomposition."""
