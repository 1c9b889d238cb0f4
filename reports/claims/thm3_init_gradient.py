"""Claim thm3-init-gradient."""
from bma_verify.reports.checks import model, numeric, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "thm3-init-gradient",
    "Theorem 3: at initialisation the gradient of the loss with respect to the selector scores already "
    "points at the true parent, through χ²-mutual information; stationarity is not needed.",
    "As stated (the paper's '≈'): with mixture output, σ(W_OV) = π and scores p̂ = 0, "
    "−∂ℓ/∂p̂_{h'} = (1/h)(π(x_h|x_{h'})/π̄(x_h) − 1), π̄ = mean over the h candidates; with the marginal "
    "P(x_h) in place of π̄, E = (1/h) J(h'), J(pa) = I_χ²(x_pa; x_h) exactly, and J(pa) > J(h') for every "
    "other h', for stationary and non-stationary μ₀. Stronger (ours, a finding): the exact expectation with "
    "π̄ also has its largest entry at pa(h).",
    (
        Check("symbolic", symbolic.thm3_init_gradient,
              "symbolic derivative of ℓ(p̂) at 0; J(pa) = I_χ² for a symbolic joint"),
        Check("exact", numeric.thm3_init_gradient_exact,
              "J (χ²-MI) form, as the paper writes it ('≈'): exact enumeration for small d, h, stationary and "
              "non-stationary μ₀; J(pa) = I_χ² and J(pa) > J(h')"),
        Check("exact", numeric.thm3_init_gradient_exact_pibar,
              "exact π̄ form (the expectation without the approximation), stationary and non-stationary μ₀",
              reading="stronger"),
        Check("monte-carlo", numeric.thm3_init_gradient_monte_carlo,
              "Monte Carlo beyond enumeration with confidence intervals, judged against the exact values"),
        Check("model", model.thm3_init_gradient,
              "autograd gradient of the real model at that initialisation equals the closed form"),
    ),
)
