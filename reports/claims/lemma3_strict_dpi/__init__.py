"""Claim ``lemma3-strict-dpi``: π ≥ ε > 0: I(x_h; x_h') ≤ α·I(x_h; x_pa) with α < 1. Its statement, readings, checks,
thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "lemma3-strict-dpi", "section": "paper", "kinds": ("symbolic", "exact", "monte-carlo"),
                 "short": "π ≥ ε > 0: I(x_h; x_h') ≤ α·I(x_h; x_pa) with α < 1"}
