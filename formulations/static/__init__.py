"""The static oracles (SPEC §3 static class: every job starts at 0 and keeps its allocation).

:mod:`.candidates` (allocations per job, exact or relaxed families), :mod:`.families` (expanding and splitting
families), :mod:`.packing` (the set-packing model), :mod:`.reduced_costs` (LP reduced-cost filtering),
:mod:`.greedy` (incumbents and repair), :mod:`.pipeline` (the pipeline every back end shares), and the back
ends :mod:`.cpsat` and :mod:`.milp` (HiGHS, CBC).
"""
