"""Agents of the Gymnasium and PettingZoo envs run as jctlab policies (rl.agent): an episode in the env and the
run through the simulator are one schedule; what an agent may not do is refused with a clear error."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.cli import main
from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.replay import replay
from jctlab.simulate import PolicyError, simulate
from rl.agent import AgentPolicy, agent_factory, marl_agent_factory
from rl.envs import EnvConfig, SchedulingEnv
from rl.maifs_policy import MaifsPolicy
from rl.maifs_workloads import family_instances
from rl.marl_env import MaifsParallelEnv
from rl.marl_observe import MarlConfig

CFG = EnvConfig(max_jobs=6, max_running=6, max_nodes=4, max_shapes=4)


def hashed_agent(salt: int, invalid_every: int = 0):
    """A deterministic agent: a valid action drawn from a hash of the observation (so the same state gets
    the same choice in the env and in the simulator), now and then an invalid one where waiting is allowed."""
    def act(obs):
        h = int.from_bytes(hashlib.sha256(b"".join(np.ascontiguousarray(v).tobytes() for v in obs.values())
                                          + bytes([salt])).digest()[:8], "big")
        mask = obs["action_mask"]
        if invalid_every and h % invalid_every == 0 and mask[0]:
            return len(mask) + 3 if h % 2 else int(np.flatnonzero(mask == 0)[0]) if (mask == 0).any() else 0
        valid = np.flatnonzero(mask)
        return int(valid[h % len(valid)])
    return act


def env_schedule(inst, act, cfg):
    env = SchedulingEnv(inst, cfg)
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, _, done, trunc, _ = env.step(act(obs))
        assert not trunc
    return env.schedule, env.total_jct


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 8_999), problem=st.sampled_from(["offline", "preemptive"]), salt=st.integers(0, 255),
       jobs=st.integers(3, 8), invalid_every=st.sampled_from([0, 3]))
def test_an_agent_makes_the_same_schedule_in_the_env_and_in_the_simulator(seed, problem, salt, jobs, invalid_every):
    inst = offline_instance(gpus=8, nodes=2, jobs=jobs, variability=0.1, locality_penalty=1.3, interarrival_s=300,
                            duration_h=(0.1, 0.6), seed=seed, problem=problem, restart_s=30.0)
    act = hashed_agent(salt, invalid_every)
    in_env, total = env_schedule(inst, act, CFG)
    pol = agent_factory(act, CFG)(inst, seed=0)
    sched, rep = simulate(inst, pol, round_s=getattr(pol, "round_s", None), method="agent")
    assert rep.valid and replay(inst, sched).valid
    assert [(s.job, s.start, s.end, s.alloc) for s in sched.segments] == \
           [(s.job, s.start, s.end, s.alloc) for s in in_env.segments]
    assert rep.objective * len(inst.jobs) == pytest.approx(total, rel=1e-9)


def test_an_invalid_action_where_a_job_must_start_is_a_policy_error():
    inst = offline_instance(gpus=8, nodes=2, jobs=3, interarrival_s=300, seed=1)
    cfg = EnvConfig(max_jobs=6, max_running=6, max_nodes=4, max_shapes=4, idle_wait=False)
    with pytest.raises(PolicyError, match="invalid where a job must start"):
        simulate(inst, AgentPolicy(inst, lambda obs: -1, cfg), method="agent")


def test_an_instance_larger_than_the_agents_tables_is_refused():
    inst = offline_instance(gpus=32, nodes=8, jobs=3, seed=1)
    with pytest.raises(InputError, match="max_nodes"):
        AgentPolicy(inst, lambda obs: 0, CFG)


def hashed_agents(salt: int, invalid_every: int = 0):
    """Per agent, :func:`hashed_agent`'s choice on its own observation (PettingZoo's parallel form)."""
    one = hashed_agent(salt, invalid_every)
    return lambda obs: {name: one(o) for name, o in obs.items()}


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 8_999), salt=st.integers(0, 255), fam=st.sampled_from(["syn-small", "syn-pai", "syn-queue"]),
       invalid_every=st.sampled_from([0, 4]))
def test_pettingzoo_agents_make_the_same_schedule_in_the_env_and_in_the_simulator(seed, salt, fam, invalid_every):
    inst = family_instances(fam, 1, "train", start=seed)[0]
    cfg = MarlConfig(max_jobs=6, max_agents=4)
    act = hashed_agents(salt, invalid_every)
    env = MaifsParallelEnv(inst, cfg)
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, _, _, trunc, _ = env.step(act(obs))
        assert not any(trunc.values())
    sched, rep = simulate(inst, marl_agent_factory(act, cfg)(inst), method="agents")
    assert rep.valid
    assert [(s.job, s.start, s.end, s.alloc) for s in sched.segments] == \
           [(s.job, s.start, s.end, s.alloc) for s in env.schedule.segments]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 8_999), salt=st.integers(0, 255), fam=st.sampled_from(["syn-small", "syn-pai", "syn-queue"]))
def test_the_maifs_policy_sees_the_envs_observations(seed, salt, fam):
    """The shipped multi-agent policy's loop (rl.maifs_policy) with a chooser over the observations makes the env's
    schedule: it counts the steps at an instant as the env does (an observed feature; it was always 0 before)."""
    inst = family_instances(fam, 1, "train", start=seed)[0]
    cfg = MarlConfig(max_jobs=32, max_agents=4)
    one = hashed_agent(salt)
    env = MaifsParallelEnv(inst, cfg)
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, _, _, _, _ = env.step({name: one(o) for name, o in obs.items()})
    pol = MaifsPolicy(inst, cfg, lambda d: np.array([one({k: v[i] for k, v in d.obs.items()})
                                                     for i in range(len(d.info.groups))]))
    sched, rep = simulate(inst, pol, method="maifs-chooser")
    assert rep.valid
    assert [(s.job, s.start, s.alloc) for s in sched.segments] == \
           [(s.job, s.start, s.alloc) for s in env.schedule.segments]


def test_the_sb3_example_trains_reproducibly_and_is_scored_by_the_harness(tmp_path, monkeypatch, capsys):
    """examples/sb3-agent: the same steps and seed give the same model, and ``jctlab evaluate --methods
    agent:factory`` scores it (every schedule replayed) next to a baseline."""
    pytest.importorskip("sb3_contrib")
    folder = Path(__file__).resolve().parent.parent / "examples" / "sb3-agent"
    monkeypatch.syspath_prepend(str(folder))
    example = importlib.import_module("agent")
    a = example.train(256, tmp_path / "a.zip", seed=3)
    b = example.train(256, tmp_path / "b.zip", seed=3)
    wa, wb = (example.MaskablePPO.load(p, device="cpu").policy.state_dict() for p in (a, b))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    monkeypatch.setenv("JCTLAB_SB3_MODEL", str(a))
    code = main(["evaluate", "--suite", "queue-small", "--methods", "agent:factory,sjf+pal", "--seeds", "1",
                 "--executor", "inline", "--out", str(tmp_path / "run"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "| agent:factory | policy | 3/3 |" in out, out
