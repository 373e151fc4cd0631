"""Reading and writing the formats: round trips, unknown fields, versions, schema conformance."""

from __future__ import annotations

import dataclasses
import inspect
import json

import jsonschema
import pytest

from jctlab.errors import InputError
from jctlab.generators import offline_instance, static_instance
from jctlab.model import Allocation, Instance, Schedule, Segment, load_instance, save_instance
from jctlab.schema import instance_schema

from .conftest import tiny_dict


def test_round_trip_is_exact(tmp_path):
    for inst in (static_instance(seed=1, variability=0.1, cpu_mem=True, ps=True),
                 offline_instance(seed=2, interference=0.2, problem="preemptive")):
        p = tmp_path / "i.json"
        save_instance(inst, p)
        assert load_instance(p) == inst
        assert load_instance(p).to_dict() == inst.to_dict()


def test_unknown_optional_fields_are_kept():
    d = tiny_dict()
    d["origin"] = {"site": "lab"}
    d["jobs"][0]["tracked"] = False
    inst = Instance.from_dict(d)
    out = inst.to_dict()
    assert out["origin"] == {"site": "lab"} and out["jobs"][0]["tracked"] is False


def test_spec_example_reads():
    """The example of SPEC §1, verbatim apart from the elided list."""
    d = {
        "format": "jctlab.instance/1", "name": "static-k16-s4-seed3", "problem": "static", "objective": "mean_jct",
        "cluster": {"nodes": [{"name": "n0", "cpus": 24, "mem_gb": 500,
                               "gpus": [{"type": "v100", "variability": {"A": 1.02, "B": 1.00}}, {"type": "v100"}]}],
                    "intra_node_gbps": 100.0, "inter_node_gbps": 25.0, "locality_penalty": 1.0,
                    "split": "proportional", "interference": {"A": {"B": 0.10}}, "restart_s": 30.0},
        "jobs": [{"name": "j0", "model": "resnet50", "arrival": 0.0, "batch": 64, "iterations": 20000,
                  "samples_per_s": {"v100": 281.3, "p100": 167.6, "k80": 39.6}, "comm_mb": 98.0,
                  "sizes": [1, 2, 4], "class": "A", "weight": 1.0, "cpu_mem": None, "ps": None,
                  "measured": {"v100": {"1": 4.395, "2": 7.922, "4": 9.452}, "v100/spread": {"4": 8.1}}}],
    }
    inst = Instance.from_dict(d)
    assert inst.jobs[0].measured["v100"][2] == 7.922
    jsonschema.validate(d, instance_schema())


def test_unknown_schedule_format_is_a_clear_error():
    with pytest.raises(InputError, match="unsupported format"):
        Schedule.from_dict({"format": "jctlab.schedule/2", "instance": "x", "segments": []})


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["cluster"]["nodes"].append(dict(d["cluster"]["nodes"][0])), "cluster.nodes[2].name"),
    (lambda d: d["jobs"].append(dict(d["jobs"][0])), "jobs[2].name"),
    (lambda d: d["jobs"][0].update(samples_per_s={"v100": 0}), "jobs[0].samples_per_s"),
    (lambda d: d["cluster"].update(locality_penalty=0.5), "cluster.locality_penalty"),
    (lambda d: d["jobs"][0].update(ps={"max_ps": 1, "theta": [1, 2]}), "jobs[0].ps.theta"),
    (lambda d: d["jobs"][0].update(cpu_mem={"levels": [[1, 2]]}), "jobs[0].cpu_mem.levels[0]"),
    (lambda d: d["jobs"][0].update(measured={"v100": {"two": 1.0}}), "jobs[0].measured.v100.two"),
])
def test_field_errors_name_the_field(mutate, field):
    d = tiny_dict()
    mutate(d)
    with pytest.raises(InputError) as e:
        Instance.from_dict(d, "f.json")
    assert e.value.field == field and str(e.value).startswith("f.json: ")


def test_generated_instances_validate_against_the_schema():
    for inst in (static_instance(seed=0, cpu_mem=True, ps=True, variability=0.1),
                 offline_instance(seed=0, interference=0.1)):
        jsonschema.validate(json.loads(json.dumps(inst.to_dict())), instance_schema())


def test_the_core_imports_none_of_the_other_packages():
    import subprocess
    import sys

    code = ("import sys, jctlab, jctlab.cli, jctlab.replay, jctlab.simulate, jctlab.kinds, jctlab.loaders;"
            "bad = {'formulations', 'oracle', 'matching', 'samplers', 'baselines', 'rl', 'evaluation'};"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("cls", [Allocation, Segment])
def test_hand_written_inits_take_the_fields_in_order_with_their_defaults(cls):
    """Allocation and Segment write their slots in their own __init__ (jctlab/model.py says why): it must take
    exactly the dataclass's fields, in order, with the same defaults, and the value must stay frozen."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in dataclasses.fields(cls)]
    assert [p.default for p in params] == [inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
                                          for f in dataclasses.fields(cls)]
    a = Allocation(("n0:0", "n0:1"), ("n1",), 2.5, None)
    args = [a.gpus, a.ps_nodes, 2.5, None] if cls is Allocation else ["j", 1.0, None, a]
    v = cls(*args)
    assert [getattr(v, f.name) for f in dataclasses.fields(cls)] == args
    assert v == cls(**{f.name: x for f, x in zip(dataclasses.fields(cls), args)}) and hash(dataclasses.replace(v)) == hash(v)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(v, dataclasses.fields(cls)[0].name, None)
