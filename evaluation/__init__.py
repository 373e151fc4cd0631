"""jctlab's evaluation harness: suites with precomputed references, a resumable runner that replays every
schedule, local and Ray executors, reports with plots, and the leaderboard (docs/evaluation.md).

Its verbs (``jctlab evaluate``, ``jctlab suite``, ``jctlab report``, ``jctlab plot``, ``jctlab leaderboard``)
reach the ``jctlab`` command through the ``jctlab.commands`` entry point (:mod:`evaluation.cli`); the core
imports nothing from here.
"""
