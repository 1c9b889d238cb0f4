"""Claim exp-fig5-generalization."""
from bma_verify.reports.checks import model
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "exp-fig5-generalization",
    "Figure 5 (d=10, H=15): models trained at L ∈ {1..20} reach L_pa^{L'} near BMA for many test L'; "
    "smaller training L generalizes better.",
    "d=10, H=15, train L ∈ {1, 2, 5, 10, 20}: L_pa^{L'} near BMA for many L'; smaller training L "
    "generalizes better.",
    (Check("model", model.exp_fig5_generalization, "L_pa^{L'} grid under named readings",
           reading="reproduction"),),
)
