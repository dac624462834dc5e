import torch, torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.fx.experimental.proxy_tensor import make_fx
from torch.testing._internal.distributed.fake_pg import FakeStore
import schedgraph

dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
def step(x, w1, w2):  # two layers, weights sharded over 2 ranks (FSDP)
    h = torch.relu(x @ funcol.all_gather_tensor(w1, 0, dist.group.WORLD).t())
    return h @ funcol.all_gather_tensor(w2, 0, dist.group.WORLD).t()
gm = make_fx(step, tracing_mode="fake")(*[torch.randn(512, 1024) for _ in range(3)])
schedgraph.export(gm, "step.json")  # the graph for the schedgraph CLI
schedgraph.schedule(gm)             # schedule + bucket, applied to gm in place
print(gm.code)
