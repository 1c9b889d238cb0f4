"""The Theorem 1 construction loaded into the real model class and compared with BMA: shared by the model checks
of bma-score-identity and thm1-construction (the same error rule on the construction and on a planted wrong
selector), and their positive control (the same rule on the construction's β → ∞ limit, computed without the model)."""
from __future__ import annotations

import numpy as np

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.reports.checks.trained import seeded_kernel
from bma_verify.reports.core import CheckContext, PositiveControl

#: Contexts per comparison (d = 5, L = 6, H = 10).
CONTEXTS = {"quick": 64, "full": 512}
#: β of the construction checks: the copies are exact to float64 (error ~ (L + H) e^{−β}).
LARGE_BETA = 40.0
#: Largest error of the construction against BMA that reads as "equal" (float64 copies at β = 40 give 1e-15).
CONSTRUCTION_TOL = 1e-6


def decide_construction(errors: dict) -> str:
    """pass when every listed error is at most ``CONSTRUCTION_TOL``."""
    return "pass" if all(e <= CONSTRUCTION_TOL for e in errors.values()) else "fail"


def construction_against_bma(ctx: CheckContext, name: str,
                             selector=None) -> tuple[dict, np.ndarray, numerics.TaskBatch]:
    """Errors of the construction at ``LARGE_BETA`` (with ``selector(kernel)`` in W_KQ when given) against BMA on
    a kernel and contexts drawn from ``ctx.rng(name)`` and ``ctx.rng(name + ":contexts")``."""
    kernel = seeded_kernel(ctx, name, 5)
    batch = numerics.sample_task(kernel, CONTEXTS[ctx.tier], 6, 10, rng=ctx.rng(name + ":contexts"))
    planted = None if selector is None else selector(kernel)
    errors = analysis.construction_errors_vs_beta(kernel, batch.context, batch.query, [LARGE_BETA], planted)
    return errors, kernel, batch


def limit_errors(kernel: np.ndarray, batch: numerics.TaskBatch) -> dict:
    """Errors of the construction's β → ∞ limit, computed without the model, against the references of
    ``construction_errors_vs_beta``: A = softmax_h' Σ_l log π(x^l_h | x^l_h') (``numerics.selector_attention``)
    against ``parent_posterior``, and its mixture Σ_h' A_hh' π(· | x^{L+1}_h') against ``bma_predictive`` (h >= 1)."""
    attention = numerics.selector_attention(np.log(kernel), batch.context)  # (B, H, H)
    mixture = attention @ kernel[batch.query]  # (B, H, d)
    posterior = numerics.parent_posterior(kernel, batch.context)
    predictive = numerics.bma_predictive(kernel, batch.context, batch.query)
    return {"attention": float(np.abs(attention - posterior).sum(-1).max()),
            "predictive": float(np.abs(mixture - predictive)[:, 1:].max())}


def limit_control(kernel: np.ndarray, batch: numerics.TaskBatch, keys: tuple[str, ...]) -> PositiveControl:
    """The positive control of a construction check: :func:`decide_construction` on the ``keys`` of
    :func:`limit_errors` (the ideal: the exact β → ∞ selector and its mixture, on the check's own contexts)."""
    limit = limit_errors(kernel, batch)
    errors = {key: limit[key] for key in keys}
    return PositiveControl("the construction's β → ∞ limit computed without the model (softmax of Σ_l log π and its "
                           "mixture over π(·|x_h')), against the same BMA references (numerics computes BMA by this "
                           "formula too: this checks the rule and the references agree, not the model)", errors,
                           decide_construction(errors) == "pass")
