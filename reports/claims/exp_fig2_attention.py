"""Claim exp-fig2-attention."""
from bma_verify.reports.checks import model
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "exp-fig2-attention",
    "Figure 2 (d=5, H=10, L=10): the trained second-layer attention puts its mass on the true parent, and "
    "L_pa approaches the BMA value.",
    "d=5, H=10, L=10: trained A^(2) puts its mass on the true parent; query loss and L_pa approach BMA.",
    (Check("model", model.exp_fig2_attention, "heat maps, parent accuracy, L_pa vs BMA over training",
           reading="reproduction", shares="fig2-run"),),
)
