"""Claim exp-fig6-column-alignment."""
from bma_verify.reports.checks import model
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "exp-fig6-column-alignment",
    "Figure 6 (d=20, H=50, L=3): the column-softmax of the trained W_tf matches that of log π "
    "(error 0.0278) while the row-softmax does not (0.350).",
    "See prop1-invariance: (1/d)‖σ_col(W_tf) − σ_col(log π)‖₁ < 0.05 and smaller than the row error.",
    (Check("model", model.exp_fig6_column_alignment, "column vs row error", reading="reproduction"),),
)
