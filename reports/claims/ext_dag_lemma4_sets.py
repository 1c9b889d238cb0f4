"""Claim ext-dag-lemma4-sets."""
from bma_verify.reports.checks import ext_dag
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim("ext-dag-lemma4-sets",
      "Ours: Lemma 4 for parent sets.",
      "Δ = E log π(x_h|x_T) − E log π(x_h|x_S) = [I(x_h;x_T) − I(x_h;x_S)] + E KL(q(·|x_S) ‖ π(·|x_S)) = "
      "Σ_ab P(x_T=a, x_S=b) KL(π(·|a) ‖ π(·|b)) ≥ 0 for every other k-set S; strict iff some positive-probability "
      "pair (a, b) has π(·|a) ≠ π(·|b).",
      (Check("symbolic", ext_dag.ext_dag_lemma4_sets_symbolic,
             "the identity for a symbolic joint of (x_T, x_S) and symbolic π_2; Δ ≡ 0 when π ignores the "
             "non-shared parent"),
       Check("exact", ext_dag.ext_dag_lemma4_sets_exact,
             "exact joints on every (h, S) of random DAGs, both μ₀; the planted non-strict instance"),
       Check("monte-carlo", ext_dag.ext_dag_lemma4_sets_monte_carlo,
             "sample means judged against the exact Δ by z and against 0 by interval; close call")),
      section="beyond")
