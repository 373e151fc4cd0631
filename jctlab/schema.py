"""JSON Schemas (draft 2020-12) of the instance and schedule formats (``jctlab schema instance|schedule``).

The schemas state the structure; the semantic rules (a GPU can host a job, no GPU hosts two jobs at
once...) are checked by the readers in :mod:`jctlab.model` and by replay.
"""

from __future__ import annotations

from typing import Any

from .model import INSTANCE_FORMAT, OBJECTIVES, PROBLEMS, SCHEDULE_FORMAT, SPLITS, STATUSES

_NONNEG = {"type": "number", "minimum": 0}
_POS = {"type": "number", "exclusiveMinimum": 0}
_NULLNUM = {"type": ["number", "null"], "minimum": 0}


def instance_schema() -> dict[str, Any]:
    gpu = {"type": "object", "required": ["type"],
           "properties": {"type": {"type": "string", "minLength": 1},
                          "variability": {"type": ["object", "null"], "additionalProperties": _NONNEG},
                          "socket": {"type": ["integer", "null"], "minimum": 0},
                          "switch": {"type": ["integer", "null"], "minimum": 0}}}
    node = {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1, "pattern": "^[^:]+$"}, "cpus": _NONNEG,
                           "mem_gb": _NONNEG, "gpus": {"type": "array", "items": gpu}}}
    job = {
        "type": "object",
        "required": ["name", "arrival", "batch", "iterations", "samples_per_s"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "model": {"type": ["string", "null"]},
            "arrival": _NONNEG, "batch": _POS, "iterations": _POS,
            "samples_per_s": {"type": "object", "additionalProperties": _NONNEG},
            "comm_mb": _NULLNUM,
            "sizes": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
            "class": {"type": ["string", "null"]},
            "weight": _POS,
            "cpu_mem": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["levels"],
                "properties": {"levels": {"type": "array", "minItems": 1, "items": {
                    "type": "array", "minItems": 3, "maxItems": 3,
                    "prefixItems": [_NONNEG, _NONNEG, _POS]}}}}]},
            "ps": {"oneOf": [{"type": "null"}, {
                "type": "object", "required": ["max_ps", "theta"],
                "properties": {"max_ps": {"type": "integer", "minimum": 1}, "ps_cpus": _NONNEG,
                               "theta": {"type": "array", "minItems": 4, "maxItems": 4, "items": _NONNEG}}}]},
            "measured": {"type": ["object", "null"], "additionalProperties": {
                "type": "object", "propertyNames": {"pattern": "^[0-9]+$"}, "additionalProperties": _POS}},
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
                "nodes": {"type": "array", "minItems": 1, "items": node},
                "intra_node_gbps": _POS, "inter_node_gbps": _POS,
                "locality_penalty": {"type": "number", "minimum": 1},
                "split": {"enum": list(SPLITS)},
                "interference": {"type": ["object", "null"], "additionalProperties": {
                    "type": "object", "additionalProperties": _NONNEG}},
                "restart_s": _NONNEG,
                "qpi_factor": {"type": "number", "minimum": 1}, "pcie_interference": _NONNEG}},
            "jobs": {"type": "array", "minItems": 1, "items": job},
        },
    }


def schedule_schema() -> dict[str, Any]:
    seg = {"type": "object", "required": ["job", "start", "gpus"], "properties": {
        "job": {"type": "string", "minLength": 1}, "start": _NONNEG, "end": _NULLNUM,
        "gpus": {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:[0-9]+$"}},
        "ps_nodes": {"type": ["array", "null"], "items": {"type": "string"}},
        "cpus_per_gpu": _NULLNUM, "mem_gb_per_gpu": _NULLNUM}}
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
            "segments": {"type": "array", "items": seg},
            "claimed": {"type": ["object", "null"], "properties": {
                "objective": {"type": ["number", "null"]}, "lower_bound": {"type": ["number", "null"]},
                "status": {"enum": list(STATUSES)}, "runtime_s": _NULLNUM}},
        },
    }


SCHEMAS = {"instance": instance_schema, "schedule": schedule_schema}
