"""What the tests of the ``ext-dag-*`` claim checks share: a quick-tier context and two ways to read an outcome."""
import json

from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, jsonable, settle


def quick_context(figures_dir) -> CheckContext:
    """The context every check test runs in: quick tier, seed 0, figures under ``figures_dir``."""
    return CheckContext(tier="quick", seed=0, figures_dir=figures_dir)


def not_discriminating(outcome) -> bool:
    """Whether ``reports.core.settle`` withholds the pass because the control was not rejected."""
    verdict, reason = settle(outcome)
    return verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def assert_json_ready(outcome) -> None:
    """The measured values, the control and the findings serialise to JSON (as the report writes them)."""
    json.dumps(jsonable(outcome.measured))
    json.dumps(jsonable(outcome.control.as_dict()))
    for finding in outcome.findings:
        json.dumps(finding.as_dict())
