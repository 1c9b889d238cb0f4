"""Claim ``exp-fig6-column-alignment``: Fig. 6: σ_col(W) aligns with σ_col(log π), unlike the rows. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "exp-fig6-column-alignment", "section": "paper", "kinds": ("model",),
                 "short": "Fig. 6: σ_col(W) aligns with σ_col(log π), unlike the rows"}
