"""The offline oracles (SPEC §3 offline class: non-preemptive jobs arriving over time).

Data layer: :mod:`.options` (what a job may run on and what it holds), :mod:`.concrete` (enumerated
allocations), :mod:`.durations` and :mod:`.classes` (relaxed classes with duration lower bounds),
:mod:`.retime` (schedules from orders), :mod:`.greedy`, :mod:`.list_scheduling` and :mod:`.local_search`
(incumbents), :mod:`.preemptive_bound`, :mod:`.time_indexed_bound`, :mod:`.latest_completions` and
:mod:`.rates` (relaxation bounds), :mod:`.symmetry` (twin nodes).

Back ends: :mod:`.cpsat` (phases in :mod:`.cpsat_phases` and :mod:`.cpsat_rounds`, model in :mod:`.cpsat_model`), :mod:`.milp`
(model in :mod:`.milp_model`), both run by the pipeline driver of :mod:`.pipeline`; :mod:`.bnb` (exact branch
and bound for small instances, its nodes priced by :mod:`.node_prices`) and :mod:`.class_search` (the same search on
the class model, one pool of GPUs per group of identical nodes: a bound for queues whose allocations are too many
to enumerate).
"""
