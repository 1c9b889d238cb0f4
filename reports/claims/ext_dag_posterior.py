"""Claim ext-dag-posterior."""
from bma_verify.reports.checks import ext_dag
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim("ext-dag-posterior",
      "Ours (not the paper's): on the k-parent DAG task the exact parent-set posterior factorises over positions.",
      "P(S_h = S | context) ∝ Π_l π_k(x^l_h | x^l_S) over the C(h, k) candidate sets under a uniform prior equals "
      "Bayes over every DAG with the full likelihood, and so does the BMA predictive; k = 1 reproduces the tree "
      "functions bit for bit.",
      (Check("exact", ext_dag.ext_dag_posterior,
             "factorised posterior and predictive vs enumeration over every DAG; k = 1 vs parent_posterior and "
             "bma_predictive (array_equal)"),), section="beyond")
