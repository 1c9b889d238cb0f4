"""Claim ``ext-selective-depth``: their task: depth 3 reaches the Bayes predictive, depth 2 not. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-selective-depth", "section": "beyond", "kinds": ("model",),
                 "short": "their task: depth 3 reaches the Bayes predictive, depth 2 not"}
