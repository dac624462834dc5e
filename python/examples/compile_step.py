import torch, torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch._inductor.config as icfg
import schedgraph

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
icfg.post_grad_custom_post_pass = schedgraph.InductorPass()  # runs on every post-grad graph
@torch.compile
def step(x, w1, w2):
    h = torch.relu(x @ funcol.all_gather_tensor(w1, 0, dist.group.WORLD).t())
    return h @ funcol.all_gather_tensor(w2, 0, dist.group.WORLD).t()
out = step(torch.randn(64, 128), torch.randn(64, 128), torch.randn(128, 64))
print(out.shape, icfg.post_grad_custom_post_pass.calls)
