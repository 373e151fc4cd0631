"""Set encoders and the two policy networks (flat and hierarchical) over :mod:`rl.observe`'s tables.

Every table is embedded row by row, rows attend to each other and to the nodes through masked
multi-head attention, and pooled with masked means: no parameter depends on the number or order of
jobs, running jobs, nodes or candidates, so a network trained on 16 jobs × 4 nodes runs on 64 × 16
(permuting the rows of a table permutes the logits that belong to them; a test checks it).

- :class:`FlatNet` scores every action of the flat space: the no-op, each preemption and each
  candidate start (job × shape × rule) from the candidate's features, its job's embedding and the
  context.
- :class:`HierNet` factors the same action into two levels. Level 1 (the allocator) scores the no-op,
  the preemptions and each (job, shape): GPU count, type, servers, and the speed model's run times of
  the shape (the best and the mean over its placements). Level 2 (the placer) scores the placement rules
  of the chosen shape from the placements' own features (nodes, sockets, switch sharing, interference,
  run time) and its own view of the free resources (no parameter shared with level 1, so either level
  can be trained while the other stays fixed). π(action) = π₁(job, shape) · π₂(rule | job, shape).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical

from .observe import F_CAND, F_GLOB, F_JOB, F_NODE, F_RUN, EnvConfig

NEG = -1e9


def mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


def pick(logits: torch.Tensor, gen: torch.Generator | None) -> int:
    """The index of the largest of 1-D logits (``gen`` None), or one drawn from their softmax with ``gen``."""
    if gen is None:
        return int(logits.argmax())
    return int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))


def masked_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Mean of rows x[..., i, :] where m[..., i] is set (zeros when none is)."""
    m = m.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(-2) / m.sum(-2).clamp(min=1.0)


def window_cut(o: dict[str, torch.Tensor], cfg: EnvConfig) -> dict[str, torch.Tensor]:
    """A batch cut to the widest window in it: the job rows past it are padding in every state, and the
    networks score the cut tables as the full ones (the action indices of the rows kept do not change)."""
    w = max(1, int(o["job_mask"].sum(-1).max()))
    if w == cfg.max_jobs:
        return o
    o = dict(o, jobs=o["jobs"][:, :w], job_mask=o["job_mask"][:, :w], cand=o["cand"][:, :w],
             cand_mask=o["cand_mask"][:, :w])
    o["action_mask"] = o["action_mask"][:, : 1 + cfg.max_running + w * cfg.per_job]
    return o


class Attend(nn.Module):
    """Rows of a table attend to the rows of another (or the same) table; padding is masked."""

    def __init__(self, d: int, heads: int = 4):
        super().__init__()
        self.att = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm = nn.LayerNorm(d)

    def forward(self, q: torch.Tensor, kv: torch.Tensor, kv_mask: torch.Tensor) -> torch.Tensor:
        pad = kv_mask == 0
        empty = pad.all(-1)
        pad = pad.clone()
        pad[empty, 0] = False                      # a batch row with no key attends to a zero padding row
        out, _ = self.att(q, kv, kv, key_padding_mask=pad, need_weights=False)
        out = out * (~empty).to(out.dtype)[:, None, None]
        return self.norm(q + out)


class Encoder(nn.Module):
    """Embeds the tables; returns job, running, node embeddings and the context vector."""

    def __init__(self, d: int = 64):
        super().__init__()
        self.job = mlp(F_JOB, d, d)
        self.run = mlp(F_RUN, d, d)
        self.node = mlp(F_NODE, d, d)
        self.glob = mlp(F_GLOB, d, d)
        self.jobs_self = Attend(d)
        self.jobs_nodes = Attend(d)
        self.ctx = mlp(4 * d, d, d)

    def forward(self, o: dict[str, torch.Tensor]):
        jm, rm, nm = o["job_mask"], o["run_mask"], o["node_mask"]
        hj = self.job(o["jobs"])
        hr = self.run(o["running"])
        hn = self.node(o["nodes"])
        hj = self.jobs_self(hj, hj, jm)
        hj = self.jobs_nodes(hj, hn, nm)
        ctx = self.ctx(torch.cat([masked_mean(hj, jm), masked_mean(hr, rm), masked_mean(hn, nm),
                                  self.glob(o["glob"])], -1))
        return hj, hr, hn, torch.relu(ctx)


class _Net(nn.Module):
    def __init__(self, cfg: EnvConfig, d: int = 64):
        super().__init__()
        self.cfg = cfg
        self.d = d
        self.enc = Encoder(d)
        self.noop = mlp(d, d, 1)
        self.preempt = mlp(2 * d, d, 1)
        self.value = mlp(d, d, 1)

    def _head(self, hr: torch.Tensor, ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        noop = self.noop(ctx)
        R = hr.shape[1]
        pre = self.preempt(torch.cat([hr, ctx[:, None].expand(-1, R, -1)], -1)).squeeze(-1)
        return noop, pre


class FlatNet(_Net):
    """One categorical over the flat action space."""

    def __init__(self, cfg: EnvConfig, d: int = 64):
        super().__init__(cfg, d)
        self.cand = mlp(F_CAND, d, d)
        self.score = mlp(3 * d, d, 1)

    def forward(self, o: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked logits over the flat actions, value)."""
        hj, hr, hn, ctx = self.enc(o)
        B, W, K, _ = o["cand"].shape
        hc = self.cand(o["cand"])
        x = torch.cat([hc, hj[:, :, None].expand(-1, -1, K, -1), ctx[:, None, None].expand(-1, W, K, -1)], -1)
        starts = self.score(x).reshape(B, W * K)
        noop, pre = self._head(hr, ctx)
        logits = torch.cat([noop, pre, starts], -1)
        logits = logits.masked_fill(o["action_mask"] == 0, NEG)
        return logits, self.value(ctx).squeeze(-1)

    def dist(self, o: dict[str, torch.Tensor]) -> tuple["FlatDist", torch.Tensor]:
        logits, v = self(o)
        return FlatDist(Categorical(logits=logits)), v

    def act(self, o: dict[str, torch.Tensor], gen: torch.Generator | None = None) -> int:
        """The action of one state (a batch of one, tables cut to their rows: :func:`rl.observe.trimmed`),
        as an index of the full action space of ``self.cfg``: the most probable (``gen`` None) or a sample."""
        logits, _ = self(o)
        a = pick(logits[0], gen)
        R = o["running"].shape[1]
        if a <= R:
            return a
        w, k = divmod(a - 1 - R, self.cfg.per_job)
        return 1 + self.cfg.max_running + w * self.cfg.per_job + k


class FlatDist:
    def __init__(self, c: Categorical):
        self.c = c

    def sample(self) -> torch.Tensor:
        return self.c.sample()

    def mode(self) -> torch.Tensor:
        return self.c.probs.argmax(-1)

    def log_prob(self, a: torch.Tensor) -> torch.Tensor:
        return self.c.log_prob(a)

    def entropy(self) -> torch.Tensor:
        return self.c.entropy()


# ---------------------------------------------------------------------------- hierarchical

#: candidate features a shape is described by at level 1 (size, type, servers) and the run-time
#: features the speed model gives it (best and mean over its placements)
SHAPE_STATIC = list(range(0, 8))
SHAPE_TIME = [12, 13, 14, 20]


class HierNet(_Net):
    """Level 1 (allocation) and level 2 (placement) over the flat action space."""

    def __init__(self, cfg: EnvConfig, d: int = 64):
        super().__init__(cfg, d)
        self.shape = mlp(len(SHAPE_STATIC) + 2 * len(SHAPE_TIME), d, d)
        self.alloc = mlp(3 * d, d, 1)
        # level 2 has parameters of its own (no shared encoder), so either level can be frozen
        self.place_nodes = mlp(F_NODE, d, d)
        self.place_ctx = mlp(d + F_GLOB, d, d)
        self.place_c = mlp(F_CAND, d, d)
        self.place = mlp(2 * d, d, 1)

    def level_parameters(self, level: int) -> list[nn.Parameter]:
        """Level 2: the placer's own parameters; level 1: every other one (encoder, allocator, value)."""
        two = [p for m in (self.place_nodes, self.place_ctx, self.place_c, self.place) for p in m.parameters()]
        if level == 2:
            return two
        ids = {id(p) for p in two}
        return [p for p in self.parameters() if id(p) not in ids]

    def shape_features(self, o: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.cfg
        B, W, K, F = o["cand"].shape
        c = o["cand"].reshape(B, W, cfg.max_shapes, cfg.rules, F)
        m = o["cand_mask"].reshape(B, W, cfg.max_shapes, cfg.rules).to(c.dtype)
        any_ = m.amax(-1)                                             # (B, W, A): the shape has a placement
        n = m.sum(-1, keepdim=True).clamp(min=1.0)
        static = (c[..., SHAPE_STATIC] * m[..., None]).amax(-2)       # same for every placement of a shape
        t = c[..., SHAPE_TIME]
        best = torch.where(m[..., None] > 0, t, torch.full_like(t, 1e4)).amin(-2)
        best = torch.where(any_[..., None] > 0, best, torch.zeros_like(best))
        mean = (t * m[..., None]).sum(-2) / n
        return torch.cat([static, best, mean], -1), any_

    def level1(self, o, hj, hr, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked logits over [no-op, preempt R, (job, shape) W·A], and the (job, shape) mask."""
        B, W = hj.shape[:2]
        A = self.cfg.max_shapes
        sf, any_ = self.shape_features(o)
        hs = self.shape(sf)
        x = torch.cat([hs, hj[:, :, None].expand(-1, -1, A, -1), ctx[:, None, None].expand(-1, W, A, -1)], -1)
        alloc = self.alloc(x).reshape(B, W * A)
        noop, pre = self._head(hr, ctx)
        logits = torch.cat([noop, pre, alloc], -1)
        R = hr.shape[1]
        mask = torch.cat([o["action_mask"][:, : 1 + R].to(torch.bool), any_.reshape(B, W * A) > 0], -1)
        return logits.masked_fill(~mask, NEG), mask

    def placer_context(self, o) -> torch.Tensor:
        """Level 2's own view of the cluster: its free resources (nodes) and the global features."""
        free = masked_mean(torch.relu(self.place_nodes(o["nodes"])), o["node_mask"])
        return torch.relu(self.place_ctx(torch.cat([free, o["glob"]], -1)))

    def level2(self, o) -> torch.Tensor:
        """Masked logits over the rules of every (job, shape): (B, W·A, P), from the placements' features
        and the cluster's free resources."""
        cfg = self.cfg
        B, W, K, F = o["cand"].shape
        ctx2 = self.placer_context(o)
        hc = self.place_c(o["cand"])                                   # (B, W, K, d)
        x = torch.cat([hc, ctx2[:, None, None].expand(-1, W, K, -1)], -1)
        logits = self.place(x).reshape(B, W * cfg.max_shapes, cfg.rules)
        m = o["cand_mask"].reshape(B, W * cfg.max_shapes, cfg.rules)
        return logits.masked_fill(m == 0, NEG)

    def act(self, o: dict[str, torch.Tensor], gen: torch.Generator | None = None) -> int:
        """:meth:`FlatNet.act` for the hierarchy: level 1 on every (job, shape), then level 2 on the
        chosen shape's placements only (the other shapes' placements are never scored)."""
        cfg = self.cfg
        hj, hr, hn, ctx = self.enc(o)
        l1, _ = self.level1(o, hj, hr, ctx)
        top = pick(l1[0], gen)
        R = hr.shape[1]
        if top <= R:
            return top
        A, P = cfg.max_shapes, cfg.rules
        w, s = divmod(top - 1 - R, A)
        cand = o["cand"][:, w, s * P: (s + 1) * P]                     # (1, P, F)
        ctx2 = self.placer_context(o)
        x = torch.cat([self.place_c(cand), ctx2[:, None].expand(-1, P, -1)], -1)
        l2 = self.place(x).reshape(P).masked_fill(o["cand_mask"][0, w, s * P: (s + 1) * P] == 0, NEG)
        return 1 + cfg.max_running + (w * A + s) * P + pick(l2, gen)

    def dist(self, o: dict[str, torch.Tensor]) -> tuple["HierDist", torch.Tensor]:
        hj, hr, hn, ctx = self.enc(o)
        l1, _ = self.level1(o, hj, hr, ctx)
        l2 = self.level2(o)
        return HierDist(self.cfg, l1, l2, hr.shape[1]), self.value(ctx).squeeze(-1)

    def forward(self, o):
        d, v = self.dist(o)
        return d.joint_logits(), v


class HierDist:
    """π(a) = π₁(top) · π₂(rule | top); top = no-op, preemption or (job, shape); flat index as the env's."""

    def __init__(self, cfg: EnvConfig, l1: torch.Tensor, l2: torch.Tensor, R: int):
        self.cfg, self.R = cfg, R
        self.c1 = Categorical(logits=l1)
        self.l2 = l2
        self.c2 = Categorical(logits=l2.reshape(-1, cfg.rules).masked_fill(
            (l2.reshape(-1, cfg.rules) <= NEG / 2).all(-1, keepdim=True), 0.0))

    def split(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat action -> (level-1 index, rule); rule 0 for the no-op and preemptions."""
        P = self.cfg.rules
        start = a > self.R
        k = (a - 1 - self.R).clamp(min=0)
        top = torch.where(start, 1 + self.R + k // P, a)
        rule = torch.where(start, k % P, torch.zeros_like(a))
        return top, rule

    def join(self, top: torch.Tensor, rule: torch.Tensor) -> torch.Tensor:
        P = self.cfg.rules
        start = top > self.R
        return torch.where(start, 1 + self.R + (top - 1 - self.R).clamp(min=0) * P + rule, top)

    def _rule_dist(self, top: torch.Tensor) -> Categorical:
        B = top.shape[0]
        ws = (top - 1 - self.R).clamp(min=0)
        l2 = self.l2[torch.arange(B), ws]
        bad = (l2 <= NEG / 2).all(-1, keepdim=True)
        return Categorical(logits=l2.masked_fill(bad, 0.0))

    def sample(self) -> torch.Tensor:
        top = self.c1.sample()
        return self.join(top, self._rule_dist(top).sample())

    def mode(self) -> torch.Tensor:
        top = self.c1.probs.argmax(-1)
        return self.join(top, self._rule_dist(top).probs.argmax(-1))

    def log_probs(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log π₁(top), log π₂(rule | top)); the second is 0 for the no-op and preemptions."""
        top, rule = self.split(a)
        lp2 = self._rule_dist(top).log_prob(rule)
        return self.c1.log_prob(top), torch.where(top > self.R, lp2, torch.zeros_like(lp2))

    def log_prob(self, a: torch.Tensor) -> torch.Tensor:
        l1, l2 = self.log_probs(a)
        return l1 + l2

    def entropy(self) -> torch.Tensor:
        return self.c1.entropy()

    def joint_logits(self) -> torch.Tensor:
        """log π over the flat action space (for behaviour cloning and checks)."""
        lp1 = torch.log_softmax(self.c1.logits, -1)
        B = lp1.shape[0]
        P = self.cfg.rules
        lp2 = torch.log_softmax(self.l2.masked_fill((self.l2 <= NEG / 2).all(-1, keepdim=True), 0.0), -1)
        starts = (lp1[:, 1 + self.R:, None] + lp2).reshape(B, -1)
        out = torch.cat([lp1[:, : 1 + self.R], starts], -1)
        return out.clamp(min=NEG)


NETS = {"ppo": FlatNet, "hrl": HierNet}
