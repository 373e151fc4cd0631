"""Learned policies: order invariance, sizes not seen in training, reproducible and resumable PPO and
hierarchical training, behaviour cloning from the oracle, the policy family and ``jctlab train``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from jctlab.cli import main
from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.model import save_instance
from jctlab.registry import policy_factory
from jctlab.replay import replay
from jctlab.simulate import simulate
from rl import bc, dagger
from rl.envs import SchedulingEnv, generator_source
from rl.hrl import placement_reward, train_hrl
from rl.nets import FlatNet, HierNet, window_cut
from rl.observe import EnvConfig
from rl.ppo import Args, collect, load_checkpoint, to_torch, train

CFG = EnvConfig(max_jobs=6, max_running=6, max_nodes=4, max_shapes=4)
GEN = dict(gpus=8, nodes=2, jobs=5, interarrival_s=300, duration_h=(0.1, 0.5), variability=0.1,
           locality_penalty=1.3)


def some_obs(cfg=CFG, seed=0, steps=2):
    env = SchedulingEnv(generator_source("offline", **dict(GEN, jobs=8)), cfg)
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):                  # a state with running jobs and several waiting
        m = np.flatnonzero(obs["action_mask"][1 + cfg.max_running:]) + 1 + cfg.max_running
        if len(m):
            obs, *_ = env.step(int(m[0]))
    return obs


def permute_jobs(obs, perm, cfg=CFG):
    o = {k: v.copy() for k, v in obs.items()}
    for k in ("jobs", "job_mask", "cand", "cand_mask"):
        o[k] = obs[k][perm]
    starts = obs["action_mask"][1 + cfg.max_running:].reshape(cfg.max_jobs, -1)[perm].reshape(-1)
    o["action_mask"][1 + cfg.max_running:] = starts
    return o


@pytest.mark.parametrize("Net", [FlatNet, HierNet])
def test_networks_are_invariant_to_job_and_node_order(Net):
    torch.manual_seed(0)
    net = Net(CFG, 32).eval()
    obs = some_obs()
    perm = np.random.default_rng(0).permutation(CFG.max_jobs)
    with torch.no_grad():
        l1, v1 = net(to_torch([obs]))
        l2, v2 = net(to_torch([permute_jobs(obs, perm)]))
        nperm = np.random.default_rng(1).permutation(CFG.max_nodes)
        o3 = {k: v.copy() for k, v in obs.items()}
        o3["nodes"], o3["node_mask"] = obs["nodes"][nperm], obs["node_mask"][nperm]
        l3, v3 = net(to_torch([o3]))
    K = CFG.per_job
    s1 = l1[0, 1 + CFG.max_running:].reshape(CFG.max_jobs, K)
    s2 = l2[0, 1 + CFG.max_running:].reshape(CFG.max_jobs, K)
    valid = torch.as_tensor(obs["cand_mask"]).bool()
    inv = torch.argsort(torch.as_tensor(perm))            # row k of the permuted table is row perm[k]
    assert torch.allclose(s1[valid], s2[inv][valid], atol=1e-4)
    assert torch.allclose(v1, v2, atol=1e-5) and torch.allclose(l1, l3, atol=1e-4) and torch.allclose(v1, v3, atol=1e-5)


def test_a_network_runs_on_larger_tables_than_it_was_built_for():
    net = HierNet(CFG, 32).eval()
    big = EnvConfig(max_jobs=20, max_running=20, max_nodes=8, max_shapes=4)
    env = SchedulingEnv(offline_instance(gpus=32, nodes=8, jobs=20, interarrival_s=60, seed=1), big)
    obs, _ = env.reset(seed=0)
    net.cfg = big                                   # the parameters do not depend on the table sizes
    with torch.no_grad():
        d, v = net.dist(to_torch([obs]))
        a = int(d.mode()[0])
    assert obs["action_mask"][a]


def test_placement_reward_by_hand():
    env = SchedulingEnv(generator_source("offline", **GEN), CFG, reward_scale=10.0)
    torch.manual_seed(0)
    net = HierNet(CFG, 16)
    ro = collect(net, [env], 30, [3])
    r2 = placement_reward(ro, Args(reward_scale=10.0), CFG.time_scale, CFG.max_running, CFG.max_shapes, CFG.rules)
    for t in range(len(ro.actions)):
        a = int(ro.actions[t])
        if a <= CFG.max_running:
            assert r2[t] == 0
            continue
        k = a - 1 - CFG.max_running
        w, s, p = k // CFG.per_job, (k % CFG.per_job) // CFG.rules, k % CFG.rules
        f = ro.obs["cand"][t, w].reshape(CFG.max_shapes, CFG.rules, -1)[s, :, 12].double()
        m = ro.obs["cand_mask"][t, w].reshape(CFG.max_shapes, CFG.rules)[s].bool()
        d = torch.expm1(f) * CFG.time_scale
        assert float(r2[t]) == pytest.approx(-float(d[p] - d[m].min()) / 10.0, rel=1e-5, abs=1e-6)


def tiny_args(out, **kw):
    base = dict(steps=96, rollout_steps=48, num_envs=2, epochs=1, minibatches=2, hidden=16, out=str(out),
                checkpoint_every=1, env=dict(max_jobs=6, max_running=6, max_nodes=4, max_shapes=4))
    base.update(kw)
    return Args(**base)


def weights(path):
    return load_checkpoint(path)["model"]


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("trainer", [train, train_hrl])
def test_training_is_reproducible_and_resumes(tmp_path, trainer):
    src = generator_source("offline", **GEN)
    p1 = trainer(tiny_args(tmp_path / "a"), src)
    p2 = trainer(tiny_args(tmp_path / "b"), src)
    assert same(weights(p1), weights(p2))
    trainer(tiny_args(tmp_path / "c", steps=48), src)           # stops after one update ("killed")
    p3 = trainer(tiny_args(tmp_path / "c"), src)                 # resumes from last.pt
    assert same(weights(p1), weights(p3))
    log = (tmp_path / "a" / "log.csv").read_text().splitlines()
    assert log[0].startswith("update,global_step") and len(log) == 3


def test_behaviour_cloning_follows_the_oracle(tmp_path):
    a = bc.BCArgs(suite="queue", instances=2, time_limit=5, epochs=40, batch=32, lr=3e-3)
    demos = [(inst.replace_jobs(inst.jobs[:5], name=f"tiny{k}"), None) for k, inst in enumerate(
        [offline_instance(gpus=4, nodes=1, jobs=5, max_size=2, interarrival_s=200, duration_h=(0.1, 0.3), seed=s)
         for s in (1, 2)])]
    import oracle

    demos = [(i, oracle.solve(i, "auto", time_limit=5).claimed_schedule()) for i, _ in demos]
    cov = bc.coverage(demos, CFG)
    assert all(abs(c) < 0.02 for c in cov), cov           # the candidate lists hold the oracle's choices
    path = bc.clone("hrl", demos, a, CFG, 32, 0, tmp_path)
    assert bc.accuracy(path) > 0.9
    again = load_checkpoint(bc.clone("hrl", demos, a, CFG, 32, 0, tmp_path, name="again.pt"))["model"]
    assert all(torch.equal(v, again[k]) for k, v in load_checkpoint(path)["model"].items())   # same seed, same weights
    pol = policy_factory(f"hrl:{path}")(demos[0][0])
    sched, rep = simulate(demos[0][0], pol)
    assert replay(demos[0][0], sched).valid
    assert rep.objective <= demos[0][1].claimed.objective * 1.05


def test_policy_family_and_cli(tmp_path):
    inst = offline_instance(gpus=8, nodes=2, jobs=6, interarrival_s=300, seed=11, topology=True)
    path = tmp_path / "i.json"
    save_instance(inst, path)
    out = tmp_path / "run"
    assert main(["train", "--policy", "ppo", "--generator", "gpus=8,nodes=2,jobs=4/5,interarrival_s=300",
                 "--steps", "40", "--rollout-steps", "40", "--num-envs", "1", "--bc-epochs", "0",
                 "--out", str(out)]) == 0
    ck = out / "final.pt"
    assert ck.exists()
    assert main(["simulate", str(path), "--policy", f"ppo:{ck}", "--json"]) == 0
    assert main(["simulate", str(path), "--policy", f"ppo:{tmp_path / 'missing.pt'}"]) == 2
    assert main(["simulate", str(path), "--policy", f"ppo:{ck}", "--time-scale", "soon"]) == 2
    assert main(["train", "--policy", "ppo", "--generator", "nonsense", "--out", str(out)]) == 2
    pre = inst.replace_jobs(inst.jobs, problem="preemptive")
    sched, rep = simulate(pre, policy_factory(f"ppo:{ck}")(pre))
    assert replay(pre, sched).valid and all(s.end is None for s in sched.segments)  # offline-trained: no preemption
    assert math.isfinite(rep.objective)


@pytest.mark.parametrize("name", ["ppo", "hrl"])
def test_shipped_checkpoints_run(name):
    from rl.policy import shipped

    if not shipped(name).exists():
        pytest.skip("checkpoint not shipped")
    inst = offline_instance(gpus=16, nodes=4, jobs=10, variability=0.1, locality_penalty=1.3, seed=5)
    sched, rep = simulate(inst, policy_factory(name)(inst))
    assert replay(inst, sched).valid


def test_learned_policy_time_scale_follows_the_jobs(tmp_path):
    """On jobs ten times longer than training's the policy stretches its time scale ten-fold, so its
    features stay in the trained range; on training-like jobs it keeps the trained scale."""
    from dataclasses import replace

    from rl.policy import LearnedPolicy
    from rl.ppo import save_checkpoint

    path = tmp_path / "c.pt"
    save_checkpoint(path, HierNet(CFG, 16), None, Args(policy="hrl", hidden=16), CFG, 0, 0)
    base = offline_instance(gpus=8, nodes=2, jobs=5, interarrival_s=300, duration_h=(0.2, 0.4), seed=2)
    long = base.replace_jobs([replace(j, iterations=j.iterations * 36) for j in base.jobs])
    scales = []
    for i in (base, long):
        pol = LearnedPolicy(i, path)
        simulate(i, pol)
        scales.append(pol.cfg.time_scale)
    assert scales[0] == CFG.time_scale
    assert scales[1] > 3 * CFG.time_scale


@pytest.mark.parametrize("Net", [FlatNet, HierNet])
def test_act_on_the_cut_tables_is_the_mode_of_the_full_distribution(Net):
    """``net.act`` (tables cut to their rows, level 2 on the chosen shape only) picks the action the full
    distribution's mode picks, and a sample drawn with a seeded generator is a valid action."""
    torch.manual_seed(1)
    big = EnvConfig(max_jobs=16, max_running=16, max_nodes=8, max_shapes=4)
    net = Net(big, 32).eval()
    env = SchedulingEnv(generator_source("offline", gpus=16, nodes=4, jobs=14, interarrival_s=120,
                                         variability=0.1, locality_penalty=1.3), big)
    rng = np.random.default_rng(0)
    seen, states = 0, []
    for ep in range(3):
        obs, _ = env.reset(seed=ep)
        done = False
        while not done:
            d = env.decision
            with torch.inference_mode():
                full = int(net.dist(to_torch([d.obs]))[0].mode()[0])
                cut = {k: torch.from_numpy(v)[None] for k, v in d.trimmed().items()}
                assert net.act(cut) == full
                assert d.obs["action_mask"][net.act(cut, torch.Generator().manual_seed(ep))]
            seen += len(d.window) < big.max_jobs
            states.append(obs)
            obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    assert seen > 0                                   # states whose tables were really cut
    # a training batch cut to its widest window: the same log-probabilities of the same action indices
    batch, acts = to_torch(states[:12]), torch.as_tensor([int(np.flatnonzero(o["action_mask"])[-1]) for o in states[:12]])
    cut = window_cut(batch, big)
    assert cut["cand"].shape[1] < big.max_jobs
    with torch.inference_mode():
        assert torch.allclose(net.dist(cut)[0].log_prob(acts), net.dist(batch)[0].log_prob(acts), atol=1e-4)


def test_dagger_lookahead_labels_are_never_worse_replay_and_repeat(tmp_path):
    """The rollout expert's label at a state is never worse than the policy's own action (its episode's
    total JCT, exact: the env is deterministic), its return-to-go is that episode's, the episode replays
    to the same states, and the same network gives the same labels."""
    torch.manual_seed(0)
    net = HierNet(CFG, 16).eval()
    inst = offline_instance(**dict(GEN, jobs=6), seed=4)
    acts, labels, rets = dagger.roll_in(net, inst, CFG, 3, 10.0)
    assert any(a != b for a, b in zip(acts, labels))       # the lookahead changes some choices here
    env = SchedulingEnv(inst, CFG, reward_scale=10.0)
    env.reset(seed=0)
    for a, label, ret in zip(acts, labels, rets):
        own = dagger._finish(net, env.fork(), a)
        best = dagger._finish(net, env.fork(), label)
        assert best <= own
        assert ret == pytest.approx(-(best - env.total_jct) / 10.0, rel=1e-6)
        env.step(a)
    ep = dagger.Episode("tiny", 4, tuple(acts), tuple(labels), tuple(rets))
    steps = dagger.episode_steps(dagger.Episode.from_json(ep.to_json()), CFG, 10.0, inst=inst)
    assert steps.labels == labels and len(steps.obs) == len(acts)
    assert dagger.roll_in(net, inst, CFG, 3, 10.0) == (acts, labels, rets)
    path = tmp_path / "d.jsonl"
    path.write_text('{"format": "jctlab.rl-dagger/1", "env": {}}\n' + ep.to_json() + "\n")
    with pytest.raises(InputError):
        dagger.load(path, CFG)                              # indices of another EnvConfig
    assert dagger.load(path) == [dagger.Episode.from_json(ep.to_json())]


def test_shipped_dagger_episodes_replay_on_this_code():
    """The shipped DAgger episodes (cloned by ``jctlab train``) belong to the default EnvConfig, hold only
    training seeds (< 9,000), and every action and label is valid when replayed on today's env (a
    sample of a dozen: the file is only usable while the env builds the same states)."""
    eps = dagger.load(bc.DATA / "dagger" / "episodes.jsonl", EnvConfig())
    assert len(eps) >= 300 and max(ep.seed for ep in eps) < 9000
    for ep in eps[::30]:
        steps = dagger.episode_steps(ep, EnvConfig(), 3600.0)
        assert len(steps) == len(ep.actions) and steps.labels == list(ep.labels)


def test_dagger_resumes_after_a_kill_in_the_middle_of_an_episode_line(tmp_path):
    """A run killed while writing an episode leaves its line without a newline: the resumed run cuts it, rolls
    that episode in again, and ends with the same episodes as a run never killed."""
    args = dagger.DaggerArgs(iterations=1, episodes=2, epochs=1, first_epochs=1, out=str(tmp_path / "a"))
    path = dagger.run(args, progress=False)
    whole = path.read_bytes()
    assert whole.count(b"\n") == 3                                 # the header and two episodes
    (tmp_path / "a" / "iter1.pt").unlink()
    path.write_bytes(whole[:-50])                                  # killed 50 bytes before the last line's end
    dagger.run(args, progress=False)
    assert path.read_bytes() == whole
