"""jctlab: samplers."""
