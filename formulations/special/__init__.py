"""Exact polynomial special cases: instances that *are* a textbook scheduling problem, solved by its algorithm.

* :mod:`.recognise` — when an instance's speed model makes it exactly one of the problems below (single-GPU
  jobs whose run time depends on the GPU only, no co-location effect, equal releases or one GPU), and the
  job × GPU run-time matrix.
* :mod:`.sequencing` — SPT, WSPT, Horn's uniform-machine rule and the Bruno-Coffman-Sethi assignment, with
  their optimality proofs.
* :mod:`.srpt` — one GPU with preemption and releases (SRPT, Schrage 1968).
* :mod:`.solve` — the Result: the schedule replayed, status ``optimal``, the theorem named in ``params``.
* :mod:`.bound` — the same assignment with the releases shifted, a lower bound where it relaxes a larger
  problem.

Guide: ``docs/oracle-special.md``.
"""
