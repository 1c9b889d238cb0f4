"""Claim ``exp-robustness``: a standard GPT also learns the task, near BMA. Its statement, readings, checks, thresholds
and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "exp-robustness", "section": "paper", "kinds": ("model",),
                 "short": "a standard GPT also learns the task, near BMA"}
