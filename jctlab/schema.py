"""JSON Schemas (draft 2020-12) of the instance and schedule formats (``jctlab schema instance|schedule``).

The schemas state the structure; the semantic rules (a GPU can host a job, no GPU hosts two jobs at
once...) are checked by the readers in :mod:`jctlab.model` and by replay.
"""

from __future__ import annotations

from typing import Any

from . import limits as L
from .model import INSTANCE_FORMAT, OBJECTIVES, PROBLEMS, SCHEDULE_FORMAT, SPLITS, STATUSES

_NONNEG = {"type": "number", "minimum": 0}
_NULLNUM = {"type": ["number", "null"], "minimum": 0}


def _num(r: L.Range, null: bool = False) -> dict[str, Any]:
    """The schema of a number in the range ``r`` of SPEC §7 (``null`` allowed too when ``null``)."""
    kind = "integer" if r.integer else "number"
    s: dict[str, Any] = {"type": [kind, "null"] if null else kind,
                         "exclusiveMinimum" if r.lo_open else "minimum": r.lo, "maximum": r.hi}
    if r.zero:
        s = {"anyOf": [{"const": 0}, s]}
    return s


def instance_schema() -> dict[str, Any]:
    gpu = {"type": "object", "required": ["type"],
           "properties": {"type": {"type": "string", "minLength": 1},
                          "variability": {"type": ["object", "null"], "additionalProperties": _num(L.VARIABILITY)},
                          "socket": _num(L.TOPOLOGY_ID, null=True), "switch": _num(L.TOPOLOGY_ID, null=True)}}
    node = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1, "pattern": "^[^:]+$"}, "cpus": _num(L.CPUS),
                           "mem_gb": _num(L.MEM_GB), "gpus": {"type": ["array", "null"], "items": gpu}}}
    job = {
        "type": "object",
        "required": ["name", "arrival", "batch", "iterations", "samples_per_s"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "model": {"type": ["string", "null"]},
            "arrival": _num(L.TIME), "batch": _num(L.BATCH), "iterations": _num(L.ITERATIONS),
            "samples_per_s": {"type": "object", "additionalProperties": _num(L.RATE)},
            "comm_mb": _num(L.COMM_MB, null=True),
            "sizes": {"type": "array", "minItems": 1,
                      "items": {"type": "integer", "minimum": 1, "maximum": L.MAX_GPUS}},
            "class": {"type": ["string", "null"]},
            "weight": _num(L.WEIGHT),
            "cpu_mem": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["levels"],
                "properties": {"levels": {"type": "array", "minItems": 1, "maxItems": L.MAX_LEVELS, "items": {
                    "type": "array", "minItems": 3, "maxItems": 3,
                    "prefixItems": [_num(L.CPUS), _num(L.MEM_GB), _num(L.SPEEDUP)]}}}}]},
            "ps": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["max_ps", "theta"],
                "properties": {"max_ps": {"type": "integer", "minimum": 1, "maximum": L.MAX_PS},
                               "ps_cpus": _num(L.CPUS),
                               "theta": {"type": "array", "minItems": 4, "maxItems": 4, "items": _num(L.THETA)}}}]},
            "measured": {"type": ["object", "null"], "additionalProperties": {
                "type": "object", "propertyNames": {"pattern": "^[0-9]{1,7}$"},
                "additionalProperties": _num(L.MEASURED)}},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://jctlab.dev/schema/instance-1.json",
        "title": "jctlab instance (v1.1)",
        "type": "object",
        "required": ["format", "name", "problem", "cluster", "jobs"],
        "properties": {
            "format": {"const": INSTANCE_FORMAT},
            "name": {"type": "string", "minLength": 1},
            "problem": {"enum": list(PROBLEMS)},
            "objective": {"enum": list(OBJECTIVES)},
            "cluster": {"type": "object", "required": ["nodes"], "properties": {
                "nodes": {"type": "array", "minItems": 1, "maxItems": L.MAX_NODES, "items": node},
                "intra_node_gbps": _num(L.BANDWIDTH), "inter_node_gbps": _num(L.BANDWIDTH),
                "locality_penalty": _num(L.LOCALITY),
                "split": {"enum": list(SPLITS)},
                "interference": {"type": ["object", "null"], "additionalProperties": {
                    "type": "object", "additionalProperties": _num(L.INTERFERENCE)}},
                "restart_s": _num(L.TIME),
                "qpi_factor": _num(L.LOCALITY), "pcie_interference": _num(L.INTERFERENCE)}},
            "jobs": {"type": "array", "minItems": 1, "maxItems": L.MAX_JOBS, "items": job},
        },
    }


def schedule_schema() -> dict[str, Any]:
    seg = {"type": "object", "required": ["job", "start", "gpus"], "properties": {
        "job": {"type": "string", "minLength": 1}, "start": _NONNEG, "end": _NULLNUM,
        "gpus": {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:[0-9]+$"}},
        "ps_nodes": {"type": ["array", "null"], "items": {"type": "string"}},
        "cpus_per_gpu": _num(L.CPUS, null=True), "mem_gb_per_gpu": _num(L.MEM_GB, null=True)}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://jctlab.dev/schema/schedule-1.json",
        "title": "jctlab schedule (v1)",
        "type": "object",
        "required": ["format", "instance", "segments"],
        "properties": {
            "format": {"const": SCHEDULE_FORMAT},
            "instance": {"type": "string", "minLength": 1},
            "method": {"type": "string"},
            "segments": {"type": "array", "maxItems": L.MAX_SEGMENTS, "items": seg},
            "claimed": {"type": ["object", "null"], "properties": {
                "objective": _NULLNUM, "lower_bound": {"type": ["number", "null"]},
                "status": {"enum": list(STATUSES)}, "runtime_s": _num(L.RUNTIME, null=True)}},
        },
    }


SCHEMAS = {"instance": instance_schema, "schedule": schedule_schema}
