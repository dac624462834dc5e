"""A llama-like training step to trace: the model of the sample graphs in
tests/data, of tools/graphgen (docs/graphgen.md) and of the device scripts.

`Step(cfg)` is a function (x, *param_shards) -> [loss, *grads]: L blocks of
rmsnorm, q/k/v/o projections with causal attention, rmsnorm and a SwiGLU
MLP, forward and backward (torch.autograd.grad) in one function, so that
make_fx traces one joint graph. FSDP over `dp_group`: every weight is kept
as a dim-0 shard and all-gathered before use (its gradient is
reduce-scattered by autograd). TP over `tp_group`: column-parallel q/k/v and
w1/w3, row-parallel o and w2, sequence parallel (activations all-gathered
into each TP region and reduce-scattered out of it).

attention="sdpa" calls F.scaled_dot_product_attention (the backend follows
the device: cuDNN for bf16 on H100/H200); attention="cudnn" calls
aten._scaled_dot_product_cudnn_attention directly, so that a GPU-free trace
(fake tensors) gives the graph a GPU trace gives.
"""
from dataclasses import dataclass

import torch
import torch.distributed._functional_collectives as funcol

# Parameters of one block, in placeholder order.
PARAMS = ("wn1", "wq", "wk", "wv", "wo", "wn2", "w1", "w3", "w2")


@dataclass
class Config:
    layers: int = 2
    hidden: int = 256
    ffn: int = 688
    heads: int = 4
    seq: int = 256
    dp: int = 1
    tp: int = 1
    dtype: torch.dtype = torch.bfloat16
    attention: str = "sdpa"  # or "cudnn"

    @classmethod
    def parse(cls, spec, **kw):
        """'L:H:F:heads:S:dp:tp' (the format of the device scripts)."""
        L, H, F, heads, S, dp, tp = (int(v) for v in spec.split(":"))
        return cls(layers=L, hidden=H, ffn=F, heads=heads, seq=S, dp=dp, tp=tp, **kw)

    def block_shapes(self):
        """TP-local weight shapes of one block, in PARAMS order."""
        H, F, tp = self.hidden, self.ffn, self.tp
        return [(H,), (H // tp, H), (H // tp, H), (H // tp, H), (H, H // tp), (H,),
                (F // tp, H), (F // tp, H), (H, F // tp)]

    def param_shapes(self):
        """Every parameter's dp shard, in placeholder order."""
        out = []
        for _ in range(self.layers):
            for s in self.block_shapes():
                out.append((s[0] // self.dp,) + tuple(s[1:]))
        return out

    def inputs(self, device="cpu", seed=0, scale=0.02):
        """Deterministic inputs: x [S/tp, H] and the parameter shards."""
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(self.seq // self.tp, self.hidden, generator=g)
        ps = [torch.randn(s, generator=g) * scale for s in self.param_shapes()]
        return [t.to(device=device, dtype=self.dtype) for t in [x] + ps]


def _rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


class Step:
    def __init__(self, cfg, dp_group=None, tp_group=None):
        self.cfg = cfg
        self.dp_group = dp_group
        self.tp_group = tp_group if cfg.tp > 1 else None

    def _weight(self, shard):
        if self.dp_group is None:
            return shard
        return funcol.all_gather_tensor_autograd(shard, 0, self.dp_group)

    def _into_tp(self, x):
        if self.tp_group is None:
            return x
        return funcol.all_gather_tensor_autograd(x, 0, self.tp_group)

    def _out_of_tp(self, x):
        if self.tp_group is None:
            return x
        return funcol.reduce_scatter_tensor_autograd(x, "sum", 0, self.tp_group)

    def _attention(self, q, k, v):
        if self.cfg.attention == "cudnn":
            return torch.ops.aten._scaled_dot_product_cudnn_attention(
                q, k, v, None, True, 0.0, True)[0]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def _block(self, h, p):
        hd = self.cfg.hidden // self.cfg.heads
        a = self._into_tp(_rmsnorm(h, self._weight(p["wn1"])))
        S = a.shape[0]
        q, k, v = (a @ self._weight(p[w]).t() for w in ("wq", "wk", "wv"))
        heads = q.shape[1] // hd
        q, k, v = (t.view(1, S, heads, hd).transpose(1, 2) for t in (q, k, v))
        o = self._attention(q, k, v).transpose(1, 2).reshape(S, heads * hd)
        h = h + self._out_of_tp(o @ self._weight(p["wo"]).t())
        m = self._into_tp(_rmsnorm(h, self._weight(p["wn2"])))
        m = torch.nn.functional.silu(m @ self._weight(p["w1"]).t()) * (m @ self._weight(p["w3"]).t())
        return h + self._out_of_tp(m @ self._weight(p["w2"]).t())

    def __call__(self, x, *params):
        params = list(params)
        n = len(PARAMS)
        h = x
        for layer in range(self.cfg.layers):
            h = self._block(h, dict(zip(PARAMS, params[n * layer: n * layer + n])))
        loss = h.float().pow(2).mean()
        return [loss] + list(torch.autograd.grad(loss, params))


def trace(cfg, dp_group=None, tp_group=None, device="cpu"):
    """make_fx (fake tensors) of one step: the joint fwd+bwd aten graph."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        args = [torch.empty(s, device=device, dtype=cfg.dtype)
                for s in [(cfg.seq // cfg.tp, cfg.hidden)] + cfg.param_shapes()]
    args = [args[0]] + [a.requires_grad_(True) for a in args[1:]]
    return make_fx(Step(cfg, dp_group, tp_group), tracing_mode="fake")(*args)
