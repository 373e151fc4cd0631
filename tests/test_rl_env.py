"""The RL environments: Gymnasium's checker, the return = −total JCT identity against replay, masks,
invalid actions, determinism, and a short MaskablePPO run (the env fits the sb3 ecosystem)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from jctlab.generators import offline_instance
from jctlab.model import Instance, save_instance
from jctlab.replay import replay
from jctlab.simulate import simulate
from rl.agent import agent_factory
from rl.envs import ENV_ID, EnvConfig, SchedulingEnv, generator_source

SMALL = EnvConfig(max_jobs=6, max_running=6, max_nodes=4, max_shapes=4)


def inst(problem="offline", seed=3, **kw) -> Instance:
    args = dict(gpus=8, nodes=2, jobs=8, variability=0.1, locality_penalty=1.3, interarrival_s=300,
                duration_h=(0.1, 0.6), seed=seed, problem=problem)
    args.update(kw)
    return offline_instance(**args)


def rollout(env: SchedulingEnv, seed: int, options=None, invalid_every: int = 0) -> tuple[float, int]:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed, options=options)
    ret, steps, done = 0.0, 0, False
    while not done:
        assert env.observation_space.contains(obs)
        mask = obs["action_mask"].astype(bool)
        assert np.array_equal(mask, env.action_masks())
        if invalid_every and steps % invalid_every == 0 and (~mask).any():
            a = int(rng.choice(np.flatnonzero(~mask)))
        else:
            a = int(rng.choice(np.flatnonzero(mask)))
        obs, r, done, trunc, info = env.step(a)
        ret += r
        steps += 1
        assert not trunc and steps < 5000
    return ret, steps


@pytest.mark.parametrize("problem", ["offline", "preemptive"])
def test_gymnasium_checker(problem):
    env = SchedulingEnv(generator_source(problem, gpus=8, nodes=2, jobs=5, variability=0.1, interarrival_s=300),
                        SMALL)
    check_env(env, skip_render_check=True)


def test_the_registered_id_makes_the_env_over_a_family_or_a_file(tmp_path):
    """``gymnasium.make`` by id (the module imported by the id's prefix too): training seeds of a family, the
    same seed giving the same instance and episode, a vector of two, and an instance file; Gymnasium's
    passive checker (on by default in ``make``) raises nothing over whole episodes."""
    env = gym.make("rl.envs:" + ENV_ID, family="queue", config=SMALL, reward_scale=100.0)
    names, rets = [], []
    for _ in range(2):
        ret, _ = rollout(env.unwrapped, 5)
        names.append(env.unwrapped.inst.name)
        rets.append(ret)
        assert int(names[-1].rsplit("seed", 1)[1]) < 9_000 and names[-1].startswith("queue-")
        rep = replay(env.unwrapped.inst, env.unwrapped.schedule)
        assert rep.valid and math.isclose(-ret * 100.0, env.unwrapped.total_jct, rel_tol=1e-9)
    assert names[0] == names[1] and rets[0] == rets[1]
    vec = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", family="small", config=SMALL)
    obs, _ = vec.reset(seed=0)
    assert obs["action_mask"].shape == (2, SMALL.n_actions) and obs["action_mask"][:, 0].all()
    vec.close()
    i = inst(jobs=5)
    save_instance(i, tmp_path / "i.json")
    env = gym.make(ENV_ID, instance=tmp_path / "i.json", config=SMALL)
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.inst == i
    done = False
    while not done:
        obs, _, done, trunc, _ = env.step(int(np.flatnonzero(obs["action_mask"])[-1]))
        assert not trunc
    assert replay(i, env.unwrapped.schedule).valid


@pytest.mark.parametrize("problem, kw", [
    ("offline", {}),
    ("offline", {"topology": True, "interference": 0.2}),
    ("preemptive", {"topology": True}),
    ("offline", {"ps": True, "cpu_mem": True, "jobs": 6}),
])
def test_return_is_minus_total_jct_of_the_replayed_schedule(problem, kw):
    i = inst(problem, **kw)
    env = SchedulingEnv(i, SMALL, reward_scale=100.0)
    for seed in range(2):
        ret, _ = rollout(env, seed, invalid_every=3)
        rep = replay(i, env.schedule)
        assert rep.valid, rep.error
        total = sum(rep.completion[j.name] - j.arrival for j in i.jobs)
        assert math.isclose(-ret * 100.0, total, rel_tol=1e-9)
        assert env.schedule.claimed.objective == pytest.approx(rep.objective)
        assert env.schedule.instance == i.name


def test_invalid_actions_are_noops_and_never_raise():
    i = inst(jobs=5)
    env, ref = SchedulingEnv(i, SMALL), SchedulingEnv(i, SMALL)
    for bad in (env.action_space.n + 5, -1, "masked"):
        obs, _ = env.reset(seed=0)
        ref.reset(seed=0)
        if bad == "masked":
            bad = int(np.flatnonzero(obs["action_mask"] == 0)[-1])
        assert obs["action_mask"][0]                  # waiting is allowed here: the invalid action waits
        o1, r1, d1, _, info = env.step(bad)
        o2, r2, d2, _, _ = ref.step(0)
        assert info["invalid_action"] and (r1, d1) == (r2, d2)
        assert all(np.array_equal(o1[k], o2[k]) for k in o1)
    # where waiting is not allowed (here: forced) an invalid action changes nothing
    env.reset(seed=0)
    env.decision.obs["action_mask"][0] = 0
    obs0 = env._obs()
    obs, r, done, _, info = env.step(int(np.flatnonzero(obs0["action_mask"] == 0)[-1]))
    assert info["invalid_action"] and r == 0.0 and not done
    assert all(np.array_equal(obs[k], obs0[k]) for k in obs)


def test_preemption_is_masked_offline_and_offered_preemptive():
    for problem in ("offline", "preemptive"):
        env = SchedulingEnv(inst(problem), SMALL)
        obs, _ = env.reset(seed=0)
        seen = False
        done = False
        rng = np.random.default_rng(1)
        while not done:
            m = obs["action_mask"]
            seen |= bool(m[1:1 + SMALL.max_running].any())
            obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        assert seen == (problem == "preemptive")


def test_same_seed_same_episode():
    env = SchedulingEnv(generator_source("offline", gpus=8, jobs=6, interarrival_s=300), SMALL)
    a = rollout(env, 7)
    s1 = env.schedule
    b = rollout(env, 7)
    assert a == b and env.schedule.segments == s1.segments


def test_the_start_taken_is_the_candidate_shown():
    i = inst(topology=True)
    env = SchedulingEnv(i, SMALL)
    obs, _ = env.reset(seed=0)
    a = int(np.flatnonzero(obs["action_mask"])[-1])
    c = env.decision.candidate(a)
    env.step(a)
    assert env.sim.engine.running[c.job].alloc == c.alloc
    assert env.sim.engine.running[c.job].base == pytest.approx(c.base_time)


def test_maskable_ppo_trains_a_few_hundred_steps():
    sb3 = pytest.importorskip("sb3_contrib")
    import torch

    torch.set_num_threads(1)
    env = SchedulingEnv(generator_source("offline", gpus=8, nodes=2, jobs=5, interarrival_s=300), SMALL,
                        reward_scale=3600.0)
    model = sb3.MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, verbose=0)
    model.learn(256)
    obs, _ = env.reset(seed=1)
    done = False
    while not done:
        a, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
        assert env.action_masks()[int(a)]
        obs, _, done, _, _ = env.step(a)
    assert replay(env.inst, env.schedule).valid
    # the documented way to score such an agent through the harness (docs/evaluation.md): the same schedule
    pol = agent_factory(lambda o: model.predict(o, action_masks=o["action_mask"], deterministic=True)[0],
                        SMALL)(env.inst)
    sched, rep = simulate(env.inst, pol, method="sb3")
    assert rep.valid and [(g.job, g.start, g.alloc) for g in sched.segments] == \
        [(g.job, g.start, g.alloc) for g in env.schedule.segments]


def test_idle_wait_off_masks_the_noop_on_an_idle_cluster():
    from dataclasses import replace

    i = inst(jobs=6, interarrival_s=3000)               # jobs often arrive to an idle cluster
    for idle_wait in (True, False):
        env = SchedulingEnv(i, replace(SMALL, idle_wait=idle_wait))
        obs, _ = env.reset(seed=0)
        done, seen_idle = False, 0
        while not done:
            d = env.decision
            if not env.sim.engine.running and env.sim.waiting and d.obs["cand_mask"].any():
                seen_idle += 1
                assert bool(obs["action_mask"][0]) == (idle_wait and env.sim.arrivals_left > 0)
            obs, _, done, _, _ = env.step(0 if obs["action_mask"][0] else int(np.flatnonzero(obs["action_mask"])[0]))
        assert seen_idle > 0
