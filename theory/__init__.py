"""Symbolic derivations (SymPy) of the paper's claims (docs/claims.md), each with a numeric verifier.

Every ``derive_*`` function builds its result from definitions (likelihoods, softmax, derivatives,
expectations) and returns a :class:`~theory.derivation.Derivation`: the steps (LaTeX-renderable), the derived
expressions, and the residuals (derived minus claimed) that simplify to zero. Every ``verify_*`` function
lambdifies the derived expressions and compares them at random points from a passed ``numpy.random.Generator``
with an independent numeric computation (``numerics`` or direct NumPy/SciPy), returning a
:class:`~theory.derivation.Verification`.

Every ``perturb_*`` function is the negative control of its claim: it applies a
:data:`~theory.derivation.Perturbation` (by default the one named in the table: a dropped term, a flipped
exponent, a transposed kernel) to the derived results and re-derives, with the derivation's own code, every
identity that depends on them; ``verify_*(..., perturbation=...)`` compares those perturbed results with the
same independent numerics. A symbolic check passes only if both reject the perturbation.

| claim id | derivation | verifier | negative control (default perturbation) |
|---|---|---|---|
| ``bma-score-identity`` | :func:`derive_bma_score_identity` | :func:`verify_bma_score_identity` | :func:`~theory.bma.transposed_kernel` |
| ``prop1-invariance`` | :func:`derive_prop1_invariance` | :func:`verify_prop1_invariance` | :func:`~theory.invariance.transposed_column_shift` |
| ``thm1-construction`` | :func:`derive_thm1_construction` | :func:`verify_thm1_construction` | :func:`~theory.construction.dropped_query_keys` |
| ``lemma3-strict-dpi`` | :func:`derive_lemma3_strict_dpi` | :func:`verify_lemma3_strict_dpi` | :func:`~theory.dpi.dropped_half_in_total_variation` |
| ``lemma4-loglik-gap`` | :func:`derive_lemma4_loglik_gap` | :func:`verify_lemma4_loglik_gap` | :func:`~theory.loglik.dropped_kl_term` |
| ``thm2-consistency`` | :func:`derive_thm2_consistency` | :func:`verify_thm2_consistency` | :func:`~theory.consistency.exponent_times_four` |
| ``thm3-init-gradient`` | :func:`derive_thm3_init_gradient` | :func:`verify_thm3_init_gradient` | :func:`~theory.gradient.kernel_mean_for_marginal` |
| ``thm3-init-gradient`` (ours: under a stationary μ₀) | :func:`derive_thm3_stationary` | :func:`verify_thm3_stationary` | :func:`~theory.thm3_stationary.candidate_law_for_parent_law` |
| ``lemma3-strict-dpi`` (ours: α* proved) | :func:`derive_lemma3_alpha` | :func:`verify_lemma3_alpha` | — (perturbed steps in ``numerics.lemma3_alpha``) |
| ``prop2-ds-quadratic`` | :func:`derive_prop2_ds_quadratic` | :func:`verify_prop2_ds_quadratic` | :func:`~theory.ds.dropped_key_quadratic` |
"""
from bma_verify.theory.bma import derive_bma_score_identity, perturb_bma_score_identity, verify_bma_score_identity
from bma_verify.theory.consistency import derive_thm2_consistency, perturb_thm2_consistency, verify_thm2_consistency
from bma_verify.theory.construction import derive_thm1_construction, perturb_thm1_construction, verify_thm1_construction
from bma_verify.theory.derivation import Derivation, Perturbation, Verification
from bma_verify.theory.dpi import derive_lemma3_strict_dpi, perturb_lemma3_strict_dpi, verify_lemma3_strict_dpi
from bma_verify.theory.ds import derive_prop2_ds_quadratic, perturb_prop2_ds_quadratic, verify_prop2_ds_quadratic
from bma_verify.theory.gradient import derive_thm3_init_gradient, perturb_thm3_init_gradient, verify_thm3_init_gradient
from bma_verify.theory.invariance import derive_prop1_invariance, perturb_prop1_invariance, verify_prop1_invariance
from bma_verify.theory.loglik import derive_lemma4_loglik_gap, perturb_lemma4_loglik_gap, verify_lemma4_loglik_gap
from bma_verify.theory.lemma3_alpha import derive_lemma3_alpha, verify_lemma3_alpha
from bma_verify.theory.thm3_stationary import derive_thm3_stationary, perturb_thm3_stationary, verify_thm3_stationary

__all__ = [
    "Derivation", "Perturbation", "Verification",
    "derive_bma_score_identity", "perturb_bma_score_identity", "verify_bma_score_identity",
    "derive_prop1_invariance", "perturb_prop1_invariance", "verify_prop1_invariance",
    "derive_thm1_construction", "perturb_thm1_construction", "verify_thm1_construction",
    "derive_lemma3_strict_dpi", "perturb_lemma3_strict_dpi", "verify_lemma3_strict_dpi",
    "derive_lemma4_loglik_gap", "perturb_lemma4_loglik_gap", "verify_lemma4_loglik_gap",
    "derive_thm2_consistency", "perturb_thm2_consistency", "verify_thm2_consistency",
    "derive_thm3_init_gradient", "perturb_thm3_init_gradient", "verify_thm3_init_gradient",
    "derive_prop2_ds_quadratic", "perturb_prop2_ds_quadratic", "verify_prop2_ds_quadratic",
    "derive_thm3_stationary", "perturb_thm3_stationary", "verify_thm3_stationary",
    "derive_lemma3_alpha", "verify_lemma3_alpha",
]
