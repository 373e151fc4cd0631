"""jctlab: rl."""
