"""Claim thm2-consistency."""
from bma_verify.reports.checks import model, numeric, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "thm2-consistency",
    "Theorem 2: the BMA posterior concentrates on the true parent as L grows, at an exponential rate.",
    "A^(2)_{h→·} → e_pa(h) as L → ∞; P(score(pa) ≤ score(h')) ≤ exp(−L Δ² / (2 log²(1/ε))) "
    "(Hoeffding; Δ = the Lemma 4 gap).",
    (
        Check("symbolic", symbolic.thm2_consistency, "the Hoeffding bound as an expression in L, Δ, ε"),
        Check("monte-carlo", numeric.thm2_consistency, "empirical error rate against L beside the bound"),
        Check("model", model.thm2_consistency, "trained model's parent accuracy against L'",
              reading="reproduction", shares="fig2-run"),
    ),
)
