"""linear_loss: row losses over the LLM head's logits without holding them (docs/linear_loss.md).

    python3 examples/linear_loss.py            # needs a CUDA device and torch
"""
import torch
import torch.nn.functional as F

import lossjit

N, H, V = 4096, 1024, 32000
dev = torch.device("cuda")
h = torch.randn(N, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
W = (torch.randn(V, H, device=dev) * H ** -0.5).to(torch.bfloat16).requires_grad_()
y = torch.randint(0, V, (N,), device=dev)
y[::7] = -100  # ignored rows

# Cross-entropy with ignore_index, as examples/cross_entropy_ignore.loss writes it: the mean over the
# rows kept, a ratio of two reductions (the chunks compute both, their sums are divided after).
ce = lossjit.LinearLoss("l = logsumexp(logits, -1) - logits[y]; sum(where(y != -100, l, 0)) / sum(y != -100)")
loss = ce(h, W, y=y)
loss.backward()
print("cross-entropy", loss.item(), "torch", F.cross_entropy(F.linear(h, W).float(), y, ignore_index=-100).item())

# z-loss with softcapped logits (Gemma's and PaLM's tricks in one line); ignored rows add 0 to the means.
zsoft = lossjit.LinearLoss("c = 30 * tanh(logits / 30); lse = logsumexp(c, -1); "
                           "mean(where(y != -100, lse - c[y], 0)) + 1e-4 * mean(lse^2)")
print("z-loss + softcap", zsoft(h, W, y=y).item())

# Label smoothing, and the loss with the accuracy beside it (one pass; gradients of the first).
smooth = lossjit.LinearLoss("param eps = 0.1; lp = logits - logsumexp(logits, -1); "
                            "loss = mean(where(y != -100, -(1 - eps) * lp[y] - eps * mean(lp, -1), 0)); "
                            "acc = mean(argmax(logits, -1) == y); loss, acc")
out = smooth(h, W, y=y)
print("label smoothing", out.loss.item(), "accuracy", out.acc.item())

# Distillation from a teacher's logits [N, V] (split with the rows like y).
teacher = torch.randn(N, V, device=dev, dtype=torch.bfloat16)
kd = lossjit.LinearLoss("param T = 2; q = t / T - logsumexp(t / T, -1); p = logits / T - logsumexp(logits / T, -1); "
                        "batchmean(sum(exp(q) * (q - p), -1)) * T^2")
print("distillation KL", kd(h, W, t=teacher).item())
