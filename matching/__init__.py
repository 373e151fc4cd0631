"""jctlab: matching."""
