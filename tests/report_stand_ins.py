"""Stand-in checks and claims for the report machinery's tests (test_reports, test_report_builder,
test_report_render): each returns a fixed outcome, so a test reads what the builder and renderers make of it.

They live in an importable module (not a test file) because ``--jobs`` workers import checks by module name.
"""
import os
import time

import matplotlib.pyplot as plt
import pytest
from tqdm import tqdm
from tqdm.auto import tqdm as auto_tqdm

import bma_verify.reports.builder as builder
from bma_verify.reports import cli
from bma_verify.reports import registry as claim_registry
from bma_verify.reports.core import CheckOutcome, Control, HoldsInstead
from bma_verify.reports.registry import Check, Claim


def passing_check(ctx):
    path = ctx.figure_path("dummy.png")
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot(ctx.rng("dummy").random(5))
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    value = float(ctx.rng("dummy").random())
    planted = 1.5  # a value above the threshold: the rule "value <= 1" must reject it
    return CheckOutcome("pass" if value <= 1.0 else "fail", {"value": value}, threshold=1.0, summary="fine",
                        figures=["dummy.png"], derivation=[("step", r"\frac{a}{b}")],
                        control=Control("a planted value above 1", {"value": planted}, rejected=not planted <= 1.0))


def failing_check(ctx):
    return CheckOutcome("fail", {"ratio": 1.5}, threshold=1.0, summary="ratio above one",
                        instance={"kernel": [[0.5, 0.5], [0.5, 0.5]]})


def uncontrolled_check(ctx):
    return CheckOutcome("pass", {"value": 0.5}, threshold=1.0, summary="passes, but nothing false was tried")


def undiscriminating_check(ctx):
    return CheckOutcome("pass", {"value": 0.5}, threshold=1.0, summary="passes, and so does its control",
                        control=Control("a planted value the rule should reject", {"value": 0.9}, rejected=False))


def unconverged_check(ctx):
    return CheckOutcome("pass", {"gap": 0.01}, summary="a trained run below the threshold, not converged",
                        control=Control("BMA on half the examples", {"gap": 0.2}, rejected=True), converged=False)


def refuted_stronger_check(ctx):
    return CheckOutcome("fail", {"ratio": 1.2}, summary="our sharper bound fails", instance={"kernel": [[1.0]]},
                        control=Control("a bound below the ratio", {"ratio": 1.2}, rejected=True))


def reproduction_fail_check(ctx):
    return CheckOutcome("fail", {"gap": 0.7}, summary="the trend goes the other way under R1",
                        control=Control("BMA itself", {"gap": 0.0}, rejected=True),
                        assumptions=["reading R1: clipped offsets", "batch 256"], converged=True)


def crashing_check(ctx):
    raise RuntimeError("boom")


def device_recording_check(ctx):
    """Appends the context's device to the file $BMA_TEST_DEVICES (a file: under --jobs the check may run in
    another process or thread than the test)."""
    with open(os.environ["BMA_TEST_DEVICES"], "a") as f:
        f.write(ctx.device + "\n")
    return passing_check(ctx)


def device_recording_check_2(ctx):  # a second function: --jobs runs each function once
    return device_recording_check(ctx)


def interrupting_check(ctx):
    raise KeyboardInterrupt


def bar_then_wait_check(ctx):
    """Makes silent progress bars of tqdm and of tqdm.auto, as the sweeps and training loops in a ``--jobs`` worker
    do (tqdm then holds a lock), writes its pid to $BMA_TEST_STARTED and waits to be stopped."""
    for bar in (tqdm, auto_tqdm):
        for _ in bar(range(1), disable=True):
            pass
    with open(os.environ["BMA_TEST_STARTED"], "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(120)


def bar_then_wait_check_2(ctx):  # a second function: --jobs runs each function once, in one worker
    return bar_then_wait_check(ctx)


GOOD = Claim("good", "paper", "statement", (Check("exact", passing_check, "d"),))
BAD = Claim("bad", "paper", "statement", (Check("exact", passing_check, "d"),
                                          Check("monte-carlo", failing_check, "d")))
CRASH = Claim("crash", "paper", "statement", (Check("exact", crashing_check, "d"),))
#: A conjecture of ours (an ext-* id, so owner "ours") whose check fails: a refuted finding, never a fail.
OURS = Claim("ext-stand-in", "ours", "statement", (Check("exact", passing_check, "d"),
                                                   Check("monte-carlo", failing_check, "d")), section="beyond")
#: The paper's own claim reported under "Beyond the paper" (as footnote 1 is): it still fails.
PAPER_BEYOND = Claim("footnote-stand-in", "paper", "statement", (Check("monte-carlo", failing_check, "d"),),
                     section="beyond")


@pytest.fixture
def registry(monkeypatch):
    """The builder sees only GOOD, BAD and CRASH."""
    claims = (GOOD, BAD, CRASH)
    monkeypatch.setattr(builder, "CLAIMS", claims)
    monkeypatch.setattr(builder, "get_claim", lambda cid: {c.id: c for c in claims}[cid])
    return claims


@pytest.fixture
def beyond_registry(monkeypatch):
    """The builder and the command see only GOOD, OURS and PAPER_BEYOND (the command imports the registry's
    claims when it runs them, and checks the ids it is given against the catalog's)."""
    claims = (GOOD, OURS, PAPER_BEYOND)
    by_id = {c.id: c for c in claims}
    for module in (builder, claim_registry):
        monkeypatch.setattr(module, "CLAIMS", claims)
        monkeypatch.setattr(module, "get_claim", by_id.__getitem__)
    monkeypatch.setattr(cli, "CLAIM_IDS", tuple(by_id))
    return claims


def repairing_check(ctx):
    """A stronger check that records what holds instead of a failing statement (with a boundary figure)."""
    figure = passing_check(ctx).figures[0]
    return CheckOutcome("pass", {"margin": 0.3}, summary="the repair holds",
                        control=Control("the repair perturbed", {"margin": -0.1}, rejected=True),
                        holds_instead=[HoldsInstead("the paper's bound for every μ₀", "the bound under a stationary μ₀",
                                                    "proved", ["step 1 checked at 12 points", "sweep: 0 of 40 fail"],
                                                    "fails from TV 0.2 on", [figure])])
