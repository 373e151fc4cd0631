"""Live scheduling for small GPU clusters: the exact models deciding what runs where now (docs/live.md).

- :mod:`live.state`     typed values: cluster, queued and running jobs, plans
- :mod:`live.readers`   cluster YAML, queue/running CSV, event job records; :mod:`live.slurm` Slurm JSON
- :mod:`live.instance`  the live state as a jctlab offline instance (running jobs pinned), plans back
- :mod:`live.fallback`  heuristic plans; :mod:`live.worker` the oracle in a process killed at the deadline
- :mod:`live.planner`   one decision within the time limit; :mod:`live.policy` the same in the simulator
- :mod:`live.store`, :mod:`live.events`, :mod:`live.daemon`  the durable rolling-horizon loop
- :mod:`live.kube`      Kubernetes Binding targets; :mod:`live.cli` the ``jctlab schedule`` verbs
"""
