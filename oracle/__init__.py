"""jctlab oracles: exact and certified-bounded references through one entry point.

>>> from oracle import solve
>>> res = solve(inst, method="auto", time_limit=60, threads=2, seed=0)   # jctlab.result.Result
"""

from .methods import solve

__all__ = ["solve"]
