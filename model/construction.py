"""Theorem 1's construction: weights that make :class:`StructuredTransformer` compute BMA (``thm1-construction``).

K = L copier heads; head k (k = 1..L) has w_L[k] = w_H[0] = 1 and every other weight 0, so its logit is 2β on
x^{L+1−k}_h, at most β elsewhere: it copies x^{L+1−k}_h up to an error of order (L + H)·e^{−β}. W_KQ is
block-diagonal with the block log π on every copied slot, so the selector score is Σ_l log π(x^l_h | x^l_{h'}),
the BMA score. W_OV = log π, so σ(W_OV) = π: with the ``mixture`` rule the prediction is exactly the BMA
predictive once the copies are exact.
"""
from __future__ import annotations

import numpy as np
import torch

from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.numerics.validation import check_kernel


def bma_construction(kernel, L: int, beta: float, output: str = "mixture", *, max_H: int = 64,
                     dtype: torch.dtype = torch.float64) -> StructuredTransformer:
    """The Theorem 1 model for ``kernel`` with K = L heads at RPE scale ``beta``.

    Parameters
    ----------
    kernel : (d, d) strictly positive transition kernel (log π enters W_KQ)
    L : int >= 1, the number of context examples the model is built for (K = L)
    beta : float > 0, the copier's inverse temperature
    output : "logit" | "mixture"
    max_H : longest chain the model accepts
    dtype : parameter dtype (float64 by default: the check compares to 1e-6 and below)

    Returns
    -------
    StructuredTransformer in eval mode, on the CPU.
    """
    kernel = check_kernel(kernel, single=True)
    if np.any(kernel <= 0):
        raise ValueError("kernel must be strictly positive for the construction (W_KQ = log π is finite only then); "
                         "draw it with eps > 0")
    if not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"L must be an integer >= 1 (K = L copier heads), got {L!r}")
    d, L = kernel.shape[0], int(L)
    config = StructuredConfig(d=d, max_H=max_H, max_L=L, K=L, output=output, beta=float(beta), init_std=0.0)
    model = StructuredTransformer(config).to(dtype)
    log_kernel = torch.as_tensor(np.log(kernel), dtype=dtype)  # (d, d)
    with torch.no_grad():
        model.w_L.zero_()
        model.w_H.zero_()
        heads = torch.arange(L)
        model.w_L[heads, heads + 1] = 1.0  # head k (0-based) copies the example at offset k + 1
        model.w_H[:, max_H - 1] = 1.0  # offset h − h' = 0
        model.W_KQ.copy_(torch.block_diag(*([log_kernel] * L)))  # (Ld, Ld)
        model.W_OV.copy_(log_kernel)
    return model.eval()
