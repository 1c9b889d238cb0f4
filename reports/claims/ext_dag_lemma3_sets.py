"""Claim ext-dag-lemma3-sets."""
from bma_verify.reports.checks import ext_dag
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim("ext-dag-lemma3-sets",
      "Ours: Lemma 3 (strict DPI) for parent sets.",
      "With π ≥ ε > 0: I(x_h; x_S) ≤ I(x_h; x_T) for every other k-set S, with ratio < 1 for S disjoint from T; "
      "for overlapping S no α < 1 holds (the ratio reaches 1). Candidate α (1 − dε, 1 − d^k ε, 1 − (dε)^k, δ(π_k), "
      "and the overlap-excess forms) are findings.",
      (Check("exact", ext_dag.ext_dag_lemma3_sets,
             "exact ratios for disjoint vs overlapping S on random DAGs (both μ₀), histograms; candidate α "
             "findings with stored counterexamples re-checked"),), section="beyond")
