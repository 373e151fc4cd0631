"""jctlab: baselines."""
