#!/usr/bin/env python3
"""Data-parallel training with a lossjit loss on 2 GPUs (torch.distributed, NCCL, DDP), checked
against the same steps on one GPU: each rank takes half of every batch, DDP averages the gradients,
so loss and parameters must equal the single-GPU run on the whole batch. Prints the largest
differences and exits 1 if they exceed 1e-5 (relative to the largest value).

    python3 examples/ddp.py [--steps 5]    # needs 2 CUDA devices
"""
import argparse
import os
import pathlib
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import lossjit  # noqa: E402

SMOOTH_L1 = (pathlib.Path(__file__).resolve().parent / "smooth_l1.loss").read_text()


def data(steps, batch=256, features=64, outputs=32):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(batch, features, generator=g), torch.randn(batch, outputs, generator=g)) for _ in range(steps)]


def model(features=64, outputs=32):
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(features, 128), torch.nn.Tanh(), torch.nn.Linear(128, outputs))


def train(net, loss, batches, device, rank=0, world=1):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for x, y in batches:
        half = x.shape[0] // world
        x, y = x[rank * half:(rank + 1) * half].to(device), y[rank * half:(rank + 1) * half].to(device)
        opt.zero_grad()
        value = loss(net(x), y)  # the lossjit op: value and gradient from one kernel
        value.backward()
        opt.step()
        reported = value.detach().clone()
        if world > 1:
            dist.all_reduce(reported)  # the whole batch's mean: the ranks' means averaged
            reported /= world
        losses.append(reported.item())
    return losses


def worker(rank, world, steps, queue):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    loss = lossjit.compile(SMOOTH_L1)
    net = DDP(model().to(device), device_ids=[rank])
    losses = train(net, loss, data(steps), device, rank, world)
    if rank == 0:
        queue.put((losses, [p.detach().cpu() for p in net.module.parameters()]))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        print("ddp: needs 2 CUDA devices; found", torch.cuda.device_count())
        return 2
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, 2, args.steps, queue)) for r in range(2)]
    for p in procs:
        p.start()
    ddp_losses, ddp_params = queue.get()
    for p in procs:
        p.join()
    # The same steps on one GPU, the whole batch at once.
    single = model().to("cuda:0")
    single_losses = train(single, lossjit.compile(SMOOTH_L1), data(args.steps), torch.device("cuda", 0))
    loss_diff = max(abs(a - b) for a, b in zip(ddp_losses, single_losses))
    param_diff = max((a - b.detach().cpu()).abs().max().item() for a, b in zip(ddp_params, single.parameters()))
    largest = max(b.detach().abs().max().item() for b in single.parameters())
    print("step losses, 2 GPUs (DDP):", ", ".join(f"{v:.7f}" for v in ddp_losses))
    print("step losses, 1 GPU:       ", ", ".join(f"{v:.7f}" for v in single_losses))
    print(f"max |loss difference| = {loss_diff:.3e}; max |parameter difference| after {args.steps} steps = "
          f"{param_diff:.3e} (largest parameter {largest:.3f})")
    ok = loss_diff <= 1e-5 * max(abs(v) for v in single_losses) and param_diff <= 1e-5 * largest
    print("ddp: equal within 1e-5" if ok else "ddp: NOT equal within 1e-5")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
