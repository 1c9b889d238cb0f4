"""Claim lemma4-loglik-gap."""
from bma_verify.reports.checks import numeric, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "lemma4-loglik-gap",
    "Lemma 4: the expected log-likelihood of the true parent exceeds that of any other candidate.",
    "E log π(x_h | x_pa) − E log π(x_h | x_{h'}) = [I(x_h; x_pa) − I(x_h; x_{h'})] + "
    "E KL(q(·|x_{h'}) ‖ π(·|x_{h'})) > 0.",
    (
        Check("symbolic", symbolic.lemma4_loglik_gap, "the identity for symbolic joints"),
        Check("exact", numeric.lemma4_loglik_gap_exact, "exact joints on random instances",
              shares="lemma3-sweep"),
        Check("monte-carlo", numeric.lemma4_loglik_gap_monte_carlo, "sample averages with standard errors"),
    ),
)
