"""Claim prop1-invariance."""
from bma_verify.reports.checks import model, numeric, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "prop1-invariance",
    "Proposition 1: the selector is invariant to adding a vector to each column of W_tf, so training only "
    "identifies log π up to column shifts; the column-softmax of W_tf matches that of log π.",
    "W + 1aᵀ gives the same A^(2) for every a; W + b1ᵀ does not (in general).",
    (
        Check("symbolic", symbolic.prop1_invariance, "exact simplification of both differences"),
        Check("exact", numeric.prop1_invariance, "random W, a, b on random contexts"),
        Check("model", model.exp_fig6_column_alignment,
              "trained W_tf: column-softmax error vs row-softmax error (paper: 0.0278 vs 0.350)",
              reading="reproduction", cites="exp-fig6-column-alignment:model"),
    ),
)
