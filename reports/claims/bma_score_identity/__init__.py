"""Claim ``bma-score-identity``: score = Σ_l log π(x_h | x_h'); its softmax is the parent posterior. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "bma-score-identity", "section": "paper", "kinds": ("symbolic", "exact", "model"),
                 "short": "score = Σ_l log π(x_h | x_h'); its softmax is the parent posterior"}
