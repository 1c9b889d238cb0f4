"""Proposition 1 numerically: how the selector's attention moves under column and row shifts of W."""

from __future__ import annotations

import numpy as np

from bma_verify.numerics.bma import selector_attention

# ----------------------------------------------------------------------------------------------------------
# Proposition 1, numerically


def prop1_shift_effects(W, a, b, context) -> dict:
    """How A = selector_attention(W, context) moves under W + 1aᵀ (column shift) and W + b1ᵀ (row shift).

    Returns the max absolute change of A for each (``prop1-invariance``: the first is 0 up to rounding; the
    second is not 0 in general, since Σ_l b[x^l_{h'}] depends on the key h').
    """
    W = np.asarray(W, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    base = selector_attention(W, context)
    column = selector_attention(W + a[None, :], context)  # (1 aᵀ)[i, j] = a_j
    row = selector_attention(W + b[:, None], context)  # (b 1ᵀ)[i, j] = b_i
    return {"column_shift_change": float(np.abs(column - base).max()),
            "row_shift_change": float(np.abs(row - base).max())}
