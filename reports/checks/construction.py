"""The Theorem 1 construction loaded into the real model class and compared with BMA: shared by the model checks
of bma-score-identity and thm1-construction (the same error rule on the construction and on a planted wrong
selector)."""
from __future__ import annotations

import numpy as np

from bma_verify import numerics
from bma_verify.model import analysis
from bma_verify.reports.checks.trained import seeded_kernel
from bma_verify.reports.core import CheckContext

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
