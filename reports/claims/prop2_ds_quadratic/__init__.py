"""Claim ``prop2-ds-quadratic``: DS task: the BMA score is quadratic; no bilinear W matches it. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "prop2-ds-quadratic", "section": "paper", "kinds": ("symbolic", "exact", "model"),
                 "short": "DS task: the BMA score is quadratic; no bilinear W matches it"}
