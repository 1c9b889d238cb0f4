"""Probe (not part of the package): where Theorem 3's J form and exact π̄ form stop holding as μ₀ leaves the
stationary law μ of π (``thm3-init-gradient``, "what holds instead": its boundary).

    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/thm3_stationary_boundary.py pibar 1000 4000
    OMP_NUM_THREADS=1 .venv/bin/python docs/probes/thm3_stationary_boundary.py boundary 1001 600

``pibar SEED N``: N stationary instances (d in 2..3, chains and trees with H in 3..5, sparse kernels: Dirichlet
α in 0.05..1, d·min π in 0.003..0.3), the exact π̄ form enumerated at every h ≥ 2; prints the violations and the
smallest margin (one JSON line).

``boundary SEED N``: N random (d, kernel, tree) instances, d in 2..4, d·min π in 0.01..0.5; for each, μ₀ moves
from μ towards each vertex of the simplex, μ₀ = μ + t·(vertex − μ), scanning t = 1/24, 2/24, …, 23/24 (the vertex
itself, a constant x_0, is left out) until the J form fails at some h (J(h') ≥ J(pa) for some h'); prints per
(d, d·min π bin) the smallest TV(μ₀, μ) at a violation (resolution: one grid step, so an upper bound on the
boundary) and how many instances had one (JSON lines). docs/notes/thm3-init-gradient.md has the numbers.
"""
from __future__ import annotations

import json
import sys

import numpy as np

from bma_verify.numerics import init_gradient, random_kernel, random_parents, stationary_distribution
from bma_verify.numerics.init_gradient_sweep import argmax_status
from bma_verify.numerics.thm3_stationary import proof_chain


def pibar(seed: int, n: int) -> dict:
    rng = np.random.default_rng(seed)
    violations, cases, smallest = 0, 0, np.inf
    for _ in range(n):
        d = int(rng.integers(2, 4))
        kernel = random_kernel(d, alpha=float(np.exp(rng.uniform(np.log(0.05), 0.0))),
                               eps=float(rng.uniform(0.003, 0.3)) / d, rng=rng)
        parents = random_parents(int(rng.integers(3, 6)), rng=rng)
        for h in range(2, parents.size):
            status, margin = argmax_status(init_gradient(kernel, parents, h), int(parents[h]))
            if status == "tie":
                continue
            cases += 1
            violations += status == "violation"
            smallest = min(smallest, margin)
    return {"probe": "pibar", "seed": seed, "instances": n, "cases": cases, "violations": violations,
            "smallest_margin": smallest}


def _j_form_fails(kernel, parents, init) -> bool:
    return any(proof_chain(kernel, parents, h, init)["margin"].min() <= 0 for h in range(2, parents.size))


def boundary(seed: int, n: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, 1.0, 25)[1:-1]
    rows: dict[tuple, dict] = {}
    for _ in range(n):
        d = int(rng.integers(2, 5))
        eps_d = float(rng.uniform(0.01, 0.5))
        kernel = random_kernel(d, alpha=float(np.exp(rng.uniform(np.log(0.1), 0.0))), eps=eps_d / d, rng=rng)
        parents = random_parents(int(rng.integers(3, 6)), rng=rng)
        mu = stationary_distribution(kernel)
        first = np.inf
        for vertex in np.eye(d):
            for t in grid:
                init = mu + t * (vertex - mu)
                if _j_form_fails(kernel, parents, init):
                    first = min(first, 0.5 * float(np.abs(init - mu).sum()))
                    break
        key = (d, "<0.1" if eps_d < 0.1 else "0.1-0.25" if eps_d < 0.25 else ">=0.25")
        row = rows.setdefault(key, {"d": d, "d_min_pi": key[1], "instances": 0, "with_violation": 0,
                                    "smallest_tv": np.inf})
        row["instances"] += 1
        row["with_violation"] += bool(np.isfinite(first))
        row["smallest_tv"] = min(row["smallest_tv"], first)
    return [dict(row, probe="boundary", seed=seed) for _, row in sorted(rows.items())]


if __name__ == "__main__":
    kind, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = [pibar(seed, n)] if kind == "pibar" else boundary(seed, n)
    for row in out:
        print(json.dumps({k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}))
