#!/usr/bin/env python3
"""Cross-entropy over logits split along the vocabulary across GPUs (tensor-parallel LM heads), with
two lossjit programs and three all-reduces of one value per row:

  1. examples/vocab_parallel_partials.loss: per row, the slice's max, sum of exp and target logit,
     from one pass over the slice (a program of three results of one value per row);
  2. after torch.distributed.all_reduce: examples/vocab_parallel_loss.loss, the loss and its fused
     gradient with respect to the slice (softmax - onehot, over N), through lossjit's autograd op.

No rank ever holds the whole vocabulary. `vocab_parallel_cross_entropy` is the recipe (docs/python.md);
run as a script it checks it on 2 GPUs against the unsplit F.cross_entropy in float64 (values and
gradients within 1e-6 of the largest) and exits 1 if off, 2 without 2 CUDA devices:

    python3 examples/vocab_parallel.py [--rows 1024 --vocab 50257]
"""
import argparse
import os
import pathlib
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
import lossjit  # noqa: E402

PARTIALS = (HERE / "vocab_parallel_partials.loss").read_text()
LOSS = (HERE / "vocab_parallel_loss.loss").read_text()


def compile_pair():
    return (lossjit.compile(PARTIALS, inputs=["x", "yl"]),
            lossjit.compile(LOSS, inputs=["x", "yl", "L", "T"]))


def vocab_parallel_cross_entropy(x, y, start, partials, loss, group=None):
    """The mean cross-entropy of the rows, differentiable with respect to x: this rank's logits
    [N, C] of classes [start, start + C), y [N] the rows' classes in the whole vocabulary (int64).
    Every rank gets the same value; each its slice's part of the gradient."""
    C = x.shape[-1]
    partials.set_param("C", C)
    loss.set_param("C", C)
    yl = y - start  # the target's column in this slice; outside [0, C) where another rank holds it
    with torch.no_grad():
        m, s, t = partials(x.detach(), yl)  # views of one [3, N] output
        M = m.clone()  # all_reduce works in place: not on m, which the next line still needs
        dist.all_reduce(M, op=dist.ReduceOp.MAX, group=group)
        S = s * torch.exp(m - M)  # each slice's sum of exp, relative to the global max
        dist.all_reduce(S, group=group)
        T = t.clone()  # the target's logit: nonzero on the one rank that holds it
        dist.all_reduce(T, group=group)
        L = M + torch.log(S)
    return loss(x, yl, L[:, None], T[:, None])


def worker(rank, world, rows, vocab, queue):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29519")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    g = torch.Generator().manual_seed(0)
    x_all = torch.randn(rows, vocab, generator=g) * 3
    y = torch.randint(0, vocab, (rows,), generator=g)
    bounds = [vocab * r // world for r in range(world + 1)]  # uneven slices when vocab is odd
    x = x_all[:, bounds[rank]:bounds[rank + 1]].to(device).requires_grad_()
    partials, loss = compile_pair()
    value = vocab_parallel_cross_entropy(x, y.to(device), bounds[rank], partials, loss)
    value.backward()
    queue.put((rank, value.item(), x.grad.cpu()))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    args = ap.parse_args()
    if torch.cuda.device_count() < 2:
        print("vocab_parallel: needs 2 CUDA devices; found", torch.cuda.device_count())
        return 2
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, 2, args.rows, args.vocab, queue)) for r in range(2)]
    for p in procs:
        p.start()
    got = sorted(queue.get() for _ in procs)
    for p in procs:
        p.join()
    # The unsplit cross-entropy in float64, on one GPU.
    g = torch.Generator().manual_seed(0)
    x_all = (torch.randn(args.rows, args.vocab, generator=g) * 3).double().cuda().requires_grad_()
    y = torch.randint(0, args.vocab, (args.rows,), generator=g).cuda()
    want = F.cross_entropy(x_all, y)
    want.backward()
    grad = torch.cat([gx for _, _, gx in got], dim=1).double()
    value_error = max(abs(v - want.item()) for _, v, _ in got) / abs(want.item())
    grad_error = ((grad - x_all.grad.cpu()).abs().max() / x_all.grad.abs().max()).item()
    print(f"vocab-parallel cross-entropy over {args.rows} rows, a vocabulary of {args.vocab} on 2 GPUs: "
          f"values {', '.join(f'{v:.9f}' for _, v, _ in got)} against {want.item():.9f} unsplit (float64); "
          f"relative errors: value {value_error:.2e}, gradient {grad_error:.2e} (of the largest)")
    ok = value_error <= 1e-6 and grad_error <= 1e-6
    print("vocab_parallel: equal within 1e-6" if ok else "vocab_parallel: NOT equal within 1e-6")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
