"""jctlab: oracle."""
