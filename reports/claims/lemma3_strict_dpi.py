"""Claim lemma3-strict-dpi."""
from bma_verify.reports.checks import numeric, symbolic
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim(
    "lemma3-strict-dpi",
    "Lemma 3 (strict DPI): if π ≥ ε entrywise, then for every non-parent h' < h, "
    "I(x_h; x_{h'}) ≤ α · I(x_h; x_pa(h)) with α < 1.",
    "As stated: if π ≥ ε entrywise (ε > 0), then for h' < h, h' ≠ pa(h), some α < 1 gives I(x_h; x_{h'}) ≤ "
    "α I(x_h; x_pa(h)): the exact ratio is < 1. Stronger (ours, findings): particular α, namely the "
    "Dobrushin coefficient δ(π), the Doeblin bound 1 − d·min π (also for ancestor pairs), and δ and η_KL of "
    "the channel x_pa(h) → x_{h'} (the last is a theorem for the pair's own channel, reported as a "
    "consistency check, not as a candidate that 'holds').",
    (
        Check("symbolic", symbolic.lemma3_strict_dpi,
              "Dobrushin and Doeblin bounds for a symbolic kernel; closed forms for the BSC"),
        Check("exact", numeric.lemma3_strict_dpi_exact,
              "exact pairwise joints on random kernels × trees × stationary and non-stationary μ₀: "
              "largest ratio I(x_h; x_h')/I(x_h; x_pa) < 1", shares="lemma3-sweep"),
        Check("exact", numeric.lemma3_alpha_candidates,
              "candidate α of ours on the same sweep: δ(π), the Doeblin bound 1 − d·min π (also for ancestor "
              "pairs), δ and η_KL of the channel x_pa → x_h'", reading="stronger", shares="lemma3-sweep"),
        Check("monte-carlo", numeric.lemma3_strict_dpi_monte_carlo,
              "plug-in and bias-corrected estimates with confidence intervals, judged against the exact values"),
    ),
)
