"""Claim ext-dag-construction."""
from bma_verify.reports.checks import ext_dag
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim("ext-dag-construction",
      "Ours: a 2-simplicial (trilinear) attention layer after the tree model's copier implements k-parent BMA "
      "exactly.",
      "With T = log π_k, softmax over candidate sets of Σ_l T[x^l_S, x^l_h] (copies exact) is the set posterior; "
      "with the copier at scale β the attention error is O(e^{−β}); k = 1 is the tree construction.",
      (Check("symbolic", ext_dag.ext_dag_construction_symbolic,
             "Bayes over every DAG with symbolic μ₀, π_1, π_2 equals the pair softmax; first-order soft-copy error"),
       Check("model", ext_dag.ext_dag_construction_model,
             "model.pair_attention in float64: error vs β against the exact set posterior and BMA predictive "
             "(k = 2, 3), k = 1 vs bma_construction")), section="beyond")
