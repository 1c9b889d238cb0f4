"""What the checks of the ``ext-dag-*`` claims share: the tolerance of an exact identity and how verdicts combine."""
from __future__ import annotations

#: Largest |lhs − rhs| of an exact identity that reads as equal (float64 sums round at ~1e-16).
IDENTITY_ATOL = 1e-10


def combine_verdicts(verdicts) -> str:
    """fail if any verdict fails, pass if there are verdicts and all pass, else inconclusive."""
    verdicts = list(verdicts)
    if "fail" in verdicts:
        return "fail"
    return "pass" if verdicts and all(v == "pass" for v in verdicts) else "inconclusive"
