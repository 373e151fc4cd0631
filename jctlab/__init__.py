"""jctlab: exact and certified-bounded job-completion-time references for DL cluster schedulers.

The core (this package) holds the contract of ``SPEC.md``: the instance and schedule model, the speed
model, the event-driven engine (replay and online simulation), metrics, data loaders and the
``jctlab`` command. It imports none of the other packages of the distribution.
"""

__version__ = "0.1.0"

from .errors import InputError, InvalidSchedule  # noqa: E402
from .model import (Allocation, Claimed, Cluster, GPU, Instance, Job, Node, Schedule, Segment,  # noqa: E402
                    load_instance, load_schedule, save_instance, save_schedule)
from .replay import Replay, replay  # noqa: E402
from .result import Result, SolveStatus, Solver  # noqa: E402

__all__ = [
    "Allocation", "Claimed", "Cluster", "GPU", "InputError", "Instance", "InvalidSchedule", "Job", "Node",
    "Replay", "Result", "Schedule", "Segment", "SolveStatus", "Solver", "load_instance", "load_schedule", "replay",
    "save_instance", "save_schedule",
]
