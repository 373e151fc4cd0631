"""jctlab: evaluation."""
