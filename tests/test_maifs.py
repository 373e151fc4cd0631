"""The MAIFS-like multi-agent policy: PettingZoo's parallel API, the return = −total JCT identity against
replay, the coordination graph (one outcome per claim, no job or GPU given twice, joint multi-node claims,
the fastest claim winning), CPU/memory levels from the cpu_mem tables, the network's invariance to agent and
job order, reproducible and resumable MAPPO, and the CLI (train, simulate on instances with and without
tables)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from pettingzoo.test import api_test, parallel_api_test

from jctlab.cli import main
from jctlab.generators import offline_instance
from jctlab.model import Instance, save_instance
from jctlab.registry import policy_factory
from jctlab.replay import replay
from jctlab.simulate import simulate
from rl.coordination import DEFERRED, GRANTED, JOINT, LOST_JOB, OUTCOMES, Claim, resolve
from rl.maifs_policy import shipped
from rl.maifs_workloads import family_instances, synergy_instance, training_source
from rl.mappo import Args, train
from rl.marl_env import MaifsParallelEnv, env as aec_env, parallel_env
from rl.marl_nets import MaifsNet, batch_obs
from rl.marl_observe import FAIR, MarlConfig, frontier
from rl.ppo import load_checkpoint

CFG = MarlConfig(max_jobs=6, max_agents=4)


def episode(env: MaifsParallelEnv, seed: int, invalid_every: int = 0, inst: Instance | None = None):
    """A masked random joint policy (every ``invalid_every`` steps one agent picks a masked action)."""
    rng = np.random.default_rng(seed)
    obs, infos = env.reset(seed=seed, options={"instance": inst} if inst else None)
    ret, steps = 0.0, 0
    while env.agents:
        acts = {}
        for a in env.agents:
            m = obs[a]["action_mask"]
            assert np.array_equal(m, infos[a]["action_mask"])
            assert env.observation_space(a).contains(obs[a])
            if invalid_every and steps % invalid_every == 0 and (m == 0).any():
                acts[a] = int(rng.choice(np.flatnonzero(m == 0)))
            else:
                acts[a] = int(rng.choice(np.flatnonzero(m)))
        obs, rew, term, trunc, infos = env.step(acts)
        ret += next(iter(rew.values()))
        steps += 1
        for a, info in infos.items():
            assert info["claim"] in OUTCOMES + ("none",)
        assert steps < 5000 and not any(trunc.values())
    return ret, steps


def test_pettingzoo_parallel_api():
    env = MaifsParallelEnv(training_source("syn-small"), MarlConfig(max_jobs=6, max_agents=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=1000)
    assert env.observation_space("agent_0") is env.observation_space("agent_0")
    assert env.state().shape == env.state_space.shape


def test_pettingzoo_constructors_and_the_aec_api(tmp_path):
    """PettingZoo's module convention: ``parallel_env(...)`` over a family's training seeds or an instance file,
    and ``env(...)``, its AEC form, which passes PettingZoo's AEC API test. The test's only warnings are its two
    advisories about Dict observations (the masks travel in the observation, as in PettingZoo's classic envs)."""
    cfg = MarlConfig(max_jobs=6, max_agents=2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        api_test(aec_env(family="syn-pai", config=cfg), num_cycles=300)
    assert {str(w.message).split(" ")[0] for w in seen} <= {"Observation"}, [str(w.message) for w in seen]
    inst = family_instances("syn-small", 1, "train", start=7)[0]
    save_instance(inst, tmp_path / "i.json")
    par = parallel_env(instance=tmp_path / "i.json", config=MarlConfig(max_agents=4))
    obs, _ = par.reset(seed=0)
    assert par.inst == inst and set(obs) == set(par.agents)
    par = parallel_env(family="syn-queue", config=cfg)
    par.reset(seed=3)
    first = par.inst.name
    par.reset(seed=3)
    assert par.inst.name == first and int(first.rsplit("seed", 1)[1]) < 9_000


@pytest.mark.parametrize("make", [
    lambda: family_instances("syn-small", 1, "train", start=7)[0],                  # 8-GPU jobs: joint claims
    lambda: family_instances("syn-pai", 1, "train", start=3)[0],                    # PAI machines
    lambda: synergy_instance(gpus=16, nodes=2, jobs=8, seed=5, topology=True, interference_scale=0.3),
    lambda: offline_instance(gpus=8, nodes=2, jobs=6, ps=True, max_size=4, interarrival_s=300, seed=4),  # PS, no table
])
def test_return_is_minus_total_jct_of_the_replayed_schedule(make):
    inst = make()
    env = MaifsParallelEnv(inst, CFG, reward_scale=100.0)
    for seed in range(2):
        ret, _ = episode(env, seed, invalid_every=3)
        rep = replay(inst, env.schedule)
        assert rep.valid, rep.error
        total = sum(rep.completion[j.name] - j.arrival for j in inst.jobs)
        assert math.isclose(-ret * 100.0, total, rel_tol=1e-9)
        assert env.coordination_totals["claims"] == sum(env.coordination_totals[o] for o in OUTCOMES)


def two_nodes(size: int, jobs: int, types=("v100", "p100")) -> Instance:
    """``jobs`` rigid jobs of ``size`` GPUs arriving at 0 on a V100 node and a P100 node of 4 GPUs each."""
    base = synergy_instance(gpus=8, nodes=2, jobs=jobs, seed=1, types=types, interference_scale=0.0)
    d = base.to_dict()
    for j in d["jobs"]:
        j["sizes"], j["arrival"] = [size], 0.0
    return Instance.from_dict(d)


def test_joint_claims_start_a_multi_node_job_and_recruit_idle_agents():
    inst = two_nodes(8, 1)                       # one 8-GPU job on two 4-GPU nodes
    env = MaifsParallelEnv(inst, CFG)
    env.reset(seed=0)
    d = env.decision
    opts = [d.options[a][0][CFG.joint_slot] for a in range(2)]
    assert all(o is not None and o.joint and o.target == 8 for o in opts)
    assert all(o is None for a in range(2) for o in d.options[a][0][:CFG.joint_slot])    # no single-node fit
    both = resolve(env.sim, env.info, [Claim(0, opts[0]), Claim(1, opts[1])])
    one = resolve(env.sim, env.info, [Claim(1, opts[1])])
    for res in (both, one):
        assert len(res.starts) == 1 and len(res.starts[0].alloc.gpus) == 8
        assert set(res.outcomes.values()) == {JOINT}
    assert both.counts()["edges_joint"] == 1 and one.recruited[0] == (0,) and one.counts()["edges_recruited"] == 1


def test_same_job_claims_conflict_and_the_fastest_wins():
    inst = two_nodes(1, 1)                        # one 1-GPU job; node 0 has V100s, node 1 P100s
    env = MaifsParallelEnv(inst, CFG)
    obs, _ = env.reset(seed=0)
    d = env.decision
    o0, o1 = d.options[0][0][0], d.options[1][0][0]
    assert o0.run_time < o1.run_time
    res = resolve(env.sim, env.info, [Claim(1, o1), Claim(0, o0)])
    assert res.outcomes == {0: GRANTED, 1: LOST_JOB} and res.conflicts == 1
    assert res.starts[0].alloc.gpus[0].startswith(o0.node)
    _, _, _, _, infos = env.step({"agent_0": d.index_of(o0), "agent_1": d.index_of(o1)})
    assert infos["agent_1"]["claim"] == LOST_JOB and infos["agent_1"]["coordination"]["conflicts"] == 1


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 8_999), claimers=st.integers(1, 4))
def test_resolution_gives_every_claim_one_outcome_and_nothing_twice(seed, claimers):
    inst = family_instances("syn-queue", 1, "train", start=seed)[0]
    env = MaifsParallelEnv(inst, MarlConfig(max_jobs=8))
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(6):
        if env.decision is None:
            break
        d = env.decision
        claims = []
        for a in rng.permutation(len(d.options))[:claimers]:
            opts = [o for row in d.options[a] for o in row if o is not None]
            if opts:
                claims.append(Claim(int(a), opts[int(rng.integers(len(opts)))]))
        res = resolve(env.sim, env.info, claims)
        assert sorted(res.outcomes) == sorted(c.agent for c in claims)          # one outcome per claim
        started = [s.job for s in res.starts]
        gpus = [g for s in res.starts for g in s.alloc.gpus]
        assert len(set(started)) == len(started) and len(set(gpus)) == len(gpus)
        assert res.conflicts == sum(1 for o in res.outcomes.values() if o in DEFERRED[:2])
        assert len(res.starts) <= sum(1 for o in res.outcomes.values() if o not in DEFERRED)
        env.sim.apply(res.starts)                  # the engine accepts every start (GPUs, CPUs, memory)
        env._settle() if res.starts else env._advance()


def test_levels_are_the_pareto_frontier_of_the_table():
    inst = synergy_instance(gpus=8, nodes=2, jobs=12, seed=3)
    for job in inst.jobs:
        lv = frontier(job)
        assert lv[-1] == FAIR
        table = [tuple(x) for x in job.cpu_mem.levels]
        front = {(x.cpus, x.mem, x.speedup) for x in lv[:-1]}
        for c, m, s in table:
            dominated = any(s2 >= s and c2 <= c and m2 <= m and (c2, m2, s2) != (c, m, s) for c2, m2, s2 in table)
            assert ((c, m, s) in front) or dominated
        assert [x.speedup for x in lv[:-1]] == sorted((x.speedup for x in lv[:-1]), reverse=True)
    plain = offline_instance(gpus=4, nodes=1, jobs=3, seed=1)
    env = MaifsParallelEnv(plain, CFG)
    env.reset(seed=0)
    levels = {o.level for row in env.decision.options[0] for o in row if o is not None}
    assert levels == {FAIR}                        # no table: the fair share only


def test_network_is_invariant_to_agent_and_job_order():
    torch.manual_seed(0)
    inst = synergy_instance(gpus=16, nodes=4, jobs=10, seed=2, interarrival_s=30)
    env = MaifsParallelEnv(inst, CFG)
    obs, _ = env.reset(seed=0)
    o = {k: np.stack([obs[a][k] for a in env.agents]) for k in obs["agent_0"]}
    net = MaifsNet(CFG, 16).eval()
    ap = np.array([2, 0, 3, 1])
    W, O = CFG.max_jobs, CFG.n_options
    jp = np.random.default_rng(0).permutation(W)
    o2 = {k: v[ap] for k, v in o.items()}
    o3 = {k: v.copy() for k, v in o.items()}
    for k in ("jobs", "opts", "opt_mask"):
        o3[k] = o[k][:, jp]
    o3["action_mask"][:, 1:] = o["action_mask"][:, 1:].reshape(len(ap), W, O)[:, jp].reshape(len(ap), -1)
    with torch.no_grad():
        l1, v1 = net(batch_obs([o]))
        l2, v2 = net(batch_obs([o2]))
        l3, v3 = net(batch_obs([o3]))
    valid = torch.as_tensor(o["action_mask"]).bool()
    assert torch.allclose(l1[0][ap][valid[ap]], l2[0][valid[ap]], atol=1e-4)
    s1 = l1[0, :, 1:].reshape(len(ap), W, O)
    s3 = l3[0, :, 1:].reshape(len(ap), W, O)
    m = torch.as_tensor(o["opt_mask"]).bool()
    assert torch.allclose(s1[:, jp][m[:, jp]], s3[m[:, jp]], atol=1e-4)
    assert torch.allclose(v1, v2, atol=1e-5) and torch.allclose(v1, v3, atol=1e-5)


def tiny(out, **kw) -> Args:
    base = dict(suite="syn-small", steps=64, rollout_steps=32, num_envs=2, epochs=1, minibatches=2, hidden=16,
                bc_episodes=2, bc_epochs=1, checkpoint_every=1, out=str(out), env=dict(max_jobs=6, max_agents=4))
    base.update(kw)
    return Args(**base)


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def test_mappo_is_reproducible_and_resumes(tmp_path):
    p1 = train(tiny(tmp_path / "a"), progress=False)
    p2 = train(tiny(tmp_path / "b"), progress=False)
    assert same(load_checkpoint(p1)["model"], load_checkpoint(p2)["model"])
    train(tiny(tmp_path / "c", steps=32), progress=False)                   # stops after one update ("killed")
    p3 = train(tiny(tmp_path / "c"), progress=False)                        # resumes from last.pt
    assert same(load_checkpoint(p1)["model"], load_checkpoint(p3)["model"])
    head, *rows = (tmp_path / "a" / "log.csv").read_text().splitlines()
    assert {"conflicts", "lost_job", "joint", "recruited"} <= set(head.split(",")) and len(rows) == 2
    assert 0.0 <= load_checkpoint(tmp_path / "a" / "bc.pt")["bc_accuracy"] <= 1.0


def test_cli_trains_and_simulates_with_and_without_tables(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--policy", "maifs", "--suite", "syn-small", "--steps", "24", "--rollout-steps", "24",
                 "--num-envs", "1", "--bc-epochs", "0", "--out", str(out)]) == 0
    ck = out / "final.pt"
    for k, inst in enumerate([synergy_instance(gpus=8, nodes=2, jobs=6, seed=8),
                              offline_instance(gpus=8, nodes=2, jobs=6, interarrival_s=300, seed=9, topology=True)]):
        path = tmp_path / f"i{k}.json"
        save_instance(inst, path)
        assert main(["simulate", str(path), "--policy", f"maifs:{ck}", "--out", str(tmp_path / "s.json")]) == 0
        assert main(["replay", str(path), str(tmp_path / "s.json")]) == 0
    assert main(["simulate", str(path), "--policy", f"maifs:{tmp_path / 'missing.pt'}"]) == 2
    assert main(["train", "--policy", "maifs", "--generator", "gpus=8", "--out", str(out)]) == 2
    assert main(["train", "--policy", "maifs", "--suite", "nonsense", "--out", str(out)]) == 2


@pytest.mark.parametrize("name", ["maifs", "maifs-greedy"])
def test_policies_run_on_node_groups_and_stay_valid(name):
    assert shipped().exists()                                   # the shipped checkpoint is package data
    inst = synergy_instance(gpus=80, nodes=20, jobs=30, seed=12, interarrival_s=60)      # 20 nodes: 16 agents
    pol = policy_factory(name)(inst)
    sched, rep = simulate(inst, pol)
    assert replay(inst, sched).valid and len(pol.info.groups) == 16
    assert pol.coordination["claims"] == sum(pol.coordination[o] for o in OUTCOMES)
