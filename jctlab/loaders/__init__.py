"""Instance builders from real public traces and measurements.

One module per data source; each returns a :class:`jctlab.model.Instance` built with
``Instance.from_dict``. Per-job-type figures come from the small tables shipped in
``jctlab/tables`` (see ``jctlab/tables/SOURCES.md``), so everything but the trace files themselves
works without the raw data directory.

- :mod:`.gavel`   Gavel physical-cluster traces and Gavel's Philly-VC traces
- :mod:`.philly`  the 82,247-job Philly trace (Pollux/AdaptDL copy) with Gavel job types
- :mod:`.pal`     PAL's Sia-Philly workloads with PAL's per-GPU variability
- :mod:`.synergy` attach Synergy CPU x memory sensitivity tables to jobs
- :mod:`.alibaba` heterogeneous clusters shaped like Alibaba PAI's machines
"""

from __future__ import annotations

from ._common import default_data_dir, load_table, require_data_dir

__all__ = ["default_data_dir", "load_table", "require_data_dir"]
