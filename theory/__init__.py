"""Symbolic derivations (SymPy) of the claims of SPEC.md §4, each with a numeric verifier.

Every ``derive_*`` function builds its result from definitions (likelihoods, softmax, derivatives,
expectations) and returns a :class:`~theory.derivation.Derivation`: the steps (LaTeX-renderable), the derived
expressions, and the residuals (derived minus claimed) that simplify to zero. Every ``verify_*`` function
lambdifies the derived expressions and compares them at random points from a passed ``numpy.random.Generator``
with an independent numeric computation (``numerics`` or direct NumPy), returning a
:class:`~theory.derivation.Verification`; ``overrides`` replaces a derived expression so a test can show that a
perturbed expression is rejected.
"""
from theory.bma import derive_bma_score_identity, verify_bma_score_identity
from theory.derivation import Derivation, Verification
from theory.invariance import derive_prop1_invariance, verify_prop1_invariance

__all__ = [
    "Derivation", "Verification",
    "derive_bma_score_identity", "verify_bma_score_identity",
    "derive_prop1_invariance", "verify_prop1_invariance",
]
