"""jctlab: formulations."""
