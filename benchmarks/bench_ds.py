"""DS benchmarks (``prop2-ds-quadratic``): the exact DS posterior for 10^4 contexts, against a per-context loop;
the sampler; one best-bilinear fit; one training step of each DS model (both FFN variants).

Target: ds_parent_posterior for 10^4 contexts at d = 5, H = 10, L = 10 in under 1 s (one core).
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from benchmarks.timing import best_of
from bma_verify.model.ds import SELECTORS, DSModel, DSModelConfig, training_batch
from bma_verify.numerics.ds import ds_log_parent_posterior, ds_parent_posterior, random_orthogonal, sample_ds_task
from bma_verify.numerics.ds_fit import fit_score


def posterior_loop(A: np.ndarray, rho: float, context: np.ndarray) -> np.ndarray:
    """The baseline: one context and one (h, h') pair at a time, the Gaussian log-likelihood written out."""
    B, L, H, d = context.shape
    var = 1 - rho * rho
    out = np.zeros((B, H, H))
    for b in range(B):
        for h in range(1, H):
            scores = np.array([-0.5 / var * sum(float(np.sum((context[b, l, h] - rho * A.T @ context[b, l, g]) ** 2))
                                                for l in range(L)) for g in range(h)])
            w = np.exp(scores - scores.max())
            out[b, h, :h] = w / w.sum()
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    d, H, L, B, rho = 5, 10, 10, 10_000, 0.5
    A = random_orthogonal(d, rng=rng)
    t_sample = best_of(lambda: sample_ds_task(A, rho, B, L, H, rng=rng))
    task = sample_ds_task(A, rho, B, L, H, rng=rng)
    t_post = best_of(lambda: ds_parent_posterior(A, rho, task.context))
    n_loop = 200
    t0 = time.perf_counter()
    looped = posterior_loop(A, rho, task.context[:n_loop])
    t_loop = (time.perf_counter() - t0) * B / n_loop
    assert np.allclose(looped, ds_parent_posterior(A, rho, task.context[:n_loop]), atol=1e-10)
    print(f"sample_ds_task, {B} contexts (d={d}, H={H}, L={L}): {t_sample:.3f} s")
    print(f"ds_parent_posterior, {B} contexts: {t_post * 1e3:.0f} ms (target < 1 s: "
          f"{'met' if t_post < 1 else 'NOT met'}); per-context loop ≈ {t_loop:.1f} s (from {n_loop}), "
          f"speed-up {t_loop / t_post:.0f}x")

    fit_task = sample_ds_task(A, rho, 1000, 3, H, rng=rng)
    post = np.exp(ds_log_parent_posterior(A, rho, fit_task.context))
    t0 = time.perf_counter()
    fit = fit_score(fit_task.context, post)
    print(f"fit_score (bilinear), 1000 contexts at L'=3: {time.perf_counter() - t0:.2f} s, {fit.n_iter} L-BFGS "
          f"iterations, gap {fit.gap:.4f} nats")

    torch.set_num_threads(1)
    # The FFN selector: the default (SwiGLU on each copied example) and the earlier variant (GELU MLP
    # on the flattened copies, full-rank 150 x 150 query-key).
    variants = [(s, {}) for s in SELECTORS] + [("ffn", {"ffn_kind": "gelu", "ffn_per_slot": False, "ffn_spare": 0,
                                                        "ffn_hidden": 256})]
    for selector, extra in variants:
        for copier in ("exact", "learned"):
            cfg = DSModelConfig(d=d, H=H, L=30, selector=selector, copier=copier, **extra)
            model = DSModel(cfg)
            x = torch.as_tensor(training_batch(A, rho, cfg, 256, rng), dtype=torch.float32)

            def step():
                mean, _ = model(x)
                ((mean[:, 1:] - x[:, -1, 1:]) ** 2).sum(-1).mean().backward()

            t = best_of(step)
            layout = "per slot" if cfg.ffn_per_slot else "flat"
            name = selector if selector != "ffn" else f"ffn ({cfg.ffn_kind}, {layout})"
            print(f"DSModel {name:22s} ({copier} copier, L=30, batch 256): forward+backward "
                  f"{t * 1e3:.1f} ms, {sum(p.numel() for p in model.parameters())} weights")
    assert math.isfinite(t)


if __name__ == "__main__":
    main()
