"""Claim ``ext-selective-claim1``: their task: the true lag has the largest expected likelihood. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-selective-claim1", "section": "beyond", "kinds": ("exact", "monte-carlo"),
                 "short": "their task: the true lag has the largest expected likelihood"}
