"""Claim exp-robustness."""
from bma_verify.reports.checks import model
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "exp-robustness",
    "Appendix G: absolute position embeddings and a standard transformer with FFN learn the same "
    "parent-selecting attention.",
    "At the fig2 setting, AbsolutePETransformer and StandardTransformer reach parent-selecting second-layer "
    "attention (parent accuracy and L_pa near BMA); the StandardTransformer (relative positions, our choice) "
    "at a declared reduced scale (d = 5, H = 6, L = 4) in the quick tier.",
    (Check("model", model.exp_robustness, "figures and numbers for both models", reading="reproduction"),),
)
