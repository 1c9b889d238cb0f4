"""Claim bma-score-identity."""
from bma_verify.reports.checks import model, numeric, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "bma-score-identity",
    "The second-layer score v_{h'}ᵀ W_KQ v_h = Σ_l x^{lᵀ}_{h'} W_tf x^l_h equals the BMA quantity "
    "Σ_l log π(x^l_h | x^l_{h'}) when W_tf = log π; its softmax is the posterior over parents.",
    "Σ_k e_{x^k_{h'}}ᵀ (log π) e_{x^k_h} = Σ_l log π(x^l_h | x^l_{h'}), and its softmax over h' < h is the "
    "Bayes posterior P(pa(h) = h' | context) derived from the factorised likelihood under a uniform prior "
    "over parents.",
    (
        Check("symbolic", symbolic.bma_score_identity,
              "Bayes' rule on the factorised likelihood with symbolic π simplifies to the softmax score"),
        Check("exact", numeric.bma_score_identity,
              "posterior by enumerating every tree with the full likelihood equals parent_posterior"),
        Check("model", model.bma_score_identity,
              "the constructed model's A^(2) equals parent_posterior at large β"),
    ),
)
