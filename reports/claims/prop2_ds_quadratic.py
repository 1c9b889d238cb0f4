"""Claim prop2-ds-quadratic."""
from bma_verify.reports.checks import ds, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "prop2-ds-quadratic",
    "Proposition 2: in the continuous (DS) setting the BMA score has a key-only quadratic term that "
    "bilinear attention cannot represent; the trained model shows a gap to BMA at small L' that closes "
    "near L' ≈ 20.",
    "DS: x_h = ρ Aᵀ x_pa(h) + √(1−ρ²) η. The BMA score is ρ/(1−ρ²) Σ_l x^{lᵀ}_{h'} A x^l_h − "
    "ρ²/(2(1−ρ²)) Σ_l ‖Aᵀ x^l_{h'}‖² + const(h); the key-only quadratic term varies with h', so no "
    "bilinear W reproduces the posterior.",
    (
        Check("symbolic", symbolic.prop2_ds_quadratic,
              "expand the Gaussian log-likelihood; Hessian of the quadratic term nonzero, bilinear zero"),
        Check("exact", ds.prop2_bilinear_fit, "best bilinear W against the exact posterior: gap vs L'"),
        Check("model", ds.prop2_trained_models,
              "trained bilinear, key-norm and FFN models against BMA: gap vs L'", reading="reproduction"),
        Check("model", ds.prop2_ffn_closes_gap,
              "the paper's open question 3: a trained gated (SwiGLU) FFN before query-key attention against BMA "
              "and the best bilinear W, gap vs L'", reading="stronger"),
    ),
)
