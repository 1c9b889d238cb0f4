"""Claim exp-fig3-parameters."""
from bma_verify.reports.checks import model
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "exp-fig3-parameters",
    "Figure 3: the trained w_H peaks at offset 0, W_KQ is block-diagonal and σ(W_OV) ≈ π.",
    "Trained w_H peaks at offset 0, W_KQ is block-diagonal, σ(W_OV) ≈ π.",
    (Check("model", model.exp_fig3_parameters, "parameter figures and numbers", reading="reproduction",
           shares="fig2-run"),),
)
