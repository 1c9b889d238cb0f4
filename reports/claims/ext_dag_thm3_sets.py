"""Claim ext-dag-thm3-sets."""
from bma_verify.reports.checks import ext_dag
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim("ext-dag-thm3-sets",
      "Ours: Theorem 3 for parent sets (mixture over candidate sets, gradient at initialisation).",
      "At p̂ = 0, −∂ℓ/∂p̂_c = (1/C)(π(x_h|x_{S_c})/π̄ − 1); J(S_h) = I_χ²(x_{S_h}; x_h); the true set's expected "
      "entry is the largest among the C(h, k) candidates (J form, as for trees; the exact π̄ form is the stronger "
      "reading), stationary and non-stationary μ₀.",
      (Check("exact", ext_dag.ext_dag_thm3_sets_j,
             "J form: is J(S_h) the largest? exact, both μ₀; smallest counterexamples re-checked"),
       Check("exact", ext_dag.ext_dag_thm3_sets_pibar, "exact π̄ form, both μ₀", reading="stronger")),
      section="beyond")
