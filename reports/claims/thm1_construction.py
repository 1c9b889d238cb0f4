"""Claim thm1-construction."""
from bma_verify.reports.checks import model, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "thm1-construction",
    "Theorem 1: a two-layer transformer with K = L copier heads and W_KQ = log π implements BMA as β → ∞, "
    "and its prediction tends to π(· | x_pa(h)) as L → ∞.",
    "With the construction, max_h ‖A^(2)_h − posterior_h‖₁ → 0 as β → ∞ (exponentially), and the prediction "
    "→ π(· | x_pa(h)) as L → ∞.",
    (
        Check("symbolic", symbolic.thm1_construction,
              "copier softmax as a function of β: one-hot limit and leading exponential error term"),
        Check("exact", model.thm1_construction_curves, "error against β and against L, float64"),
        Check("model", model.thm1_construction,
              "the constructed weights loaded into StructuredTransformer reproduce BMA"),
    ),
)
