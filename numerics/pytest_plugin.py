"""pytest plugin of bma-verify: Hypothesis settings profiles and fixtures for property tests in your own suite.

Installing the package registers this module as a pytest plugin (entry point ``pytest11``, name ``bma_verify``);
nothing needs to be imported or listed in ``conftest.py``. It

- registers the Hypothesis settings profiles ``bma-dev``, ``bma-ci`` and ``bma-thorough`` (:data:`PROFILES`) and
  loads the one named by the environment variable ``HYPOTHESIS_PROFILE`` (an unknown name stops the run with a usage
  error instead of being ignored). Hypothesis' own ``--hypothesis-profile NAME`` option takes precedence; with
  neither, the settings are left as they are (Hypothesis' defaults, its own ``ci`` profile where it detects a CI
  server, or what your ``conftest.py`` loads). The names carry a ``bma-`` prefix so that registering them never
  redefines a profile Hypothesis (``default``, ``ci``) or your project already has: Hypothesis loads its ``ci``
  profile by itself on CI servers, and redefining it would change the settings of every suite that merely has the
  package installed;
- offers fixtures drawing from a numpy Generator seeded by ``--bma-seed`` (default 0) and the test's id, so each
  test gets its own reproducible stream: ``bma_rng``, ``bma_kernel``, ``bma_instance``, and ``bma_strategies``
  (the module :mod:`numerics.strategies`, for ``@given``).

``bma_kernel`` and ``bma_instance`` take keyword options through indirect parametrisation::

    @pytest.mark.parametrize("bma_kernel", [{"d": 4, "min_eps": 0.05}], indirect=True)
    def test_rows_sum_to_one(bma_kernel):
        ...

Disable the plugin with ``-p no:bma_verify``.
"""
from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

from bma_verify.numerics import strategies
from bma_verify.numerics.task import random_kernel, random_parents

#: The settings profiles (keyword arguments of ``hypothesis.settings``): ``bma-dev`` for quick local runs,
#: ``bma-ci`` reproducible (derandomised) with a failure blob to replay, ``bma-thorough`` for a long hunt.
PROFILES = {
    "bma-dev": {"max_examples": 30, "deadline": None},
    "bma-ci": {"max_examples": 60, "deadline": None, "derandomize": True, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow]},
    "bma-thorough": {"max_examples": 1000, "deadline": None, "suppress_health_check": [HealthCheck.too_slow]},
}
PROFILE_ENV = "HYPOTHESIS_PROFILE"

#: Defaults of the ``bma_kernel`` / ``bma_instance`` fixtures (override any of them by indirect parametrisation).
KERNEL_DEFAULTS = {"d": 3, "alpha": 1.0, "min_eps": 0.01}
INSTANCE_DEFAULTS = {**KERNEL_DEFAULTS, "H": 5, "stationary": False, "min_mass": 0.0}


def register_profiles() -> None:
    """Register :data:`PROFILES` with Hypothesis (idempotent)."""
    for name, kwargs in PROFILES.items():
        settings.register_profile(name, **kwargs)


def load_profile_from_env(default: str | None = None) -> str | None:
    """Load the profile named by ``HYPOTHESIS_PROFILE`` (or ``default`` when it is unset); return its name.

    Raises ``ValueError`` naming the registered profiles when the name is unknown.
    """
    name = os.environ.get(PROFILE_ENV) or default
    if name is None:
        return None
    try:
        settings.load_profile(name)
    except InvalidArgument:
        known = ", ".join(sorted(getattr(settings, "_profiles", PROFILES)))
        raise ValueError(f"{PROFILE_ENV}={name!r} is not a registered Hypothesis settings profile (known: {known}); "
                         "use one of them, or register yours in the conftest.py at your project's root") from None
    return name


# Registered at import, before any pytest_configure runs, so that --hypothesis-profile=bma-thorough (handled by
# Hypothesis' own plugin) finds the profile whatever the order in which the plugins are configured.
register_profiles()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("bma_verify", "bma-verify fixtures")
    group.addoption("--bma-seed", type=int, default=0,
                    help="base seed of the bma_rng / bma_kernel / bma_instance fixtures (default 0)")


def pytest_configure(config) -> None:
    if config.getoption("--hypothesis-profile", default=None):
        return  # Hypothesis' own option wins
    try:
        load_profile_from_env()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config) -> str | None:
    name = os.environ.get(PROFILE_ENV)
    return f"bma-verify: {PROFILE_ENV}={name}" if name else None


@pytest.fixture
def bma_strategies():
    """The module :mod:`numerics.strategies` (``kernels``, ``parent_trees``, ``init_distributions``,
    ``joint_distributions``, ``contexts``, ``instances``), for use with ``hypothesis.given``."""
    return strategies


@pytest.fixture
def bma_seed(request) -> int:
    """The seed of this test's Generator: ``--bma-seed`` mixed with a CRC32 of the test's node id."""
    base = request.config.getoption("--bma-seed", default=0) or 0
    return (int(base) * 1_000_003 + zlib.crc32(request.node.nodeid.encode())) % 2**32


@pytest.fixture
def bma_rng(bma_seed) -> np.random.Generator:
    """A numpy Generator seeded by ``bma_seed`` (the same stream every run of the same test and --bma-seed)."""
    return np.random.default_rng(bma_seed)


def _options(request, defaults: dict, fixture: str) -> dict:
    given = getattr(request, "param", None) or {}
    if not isinstance(given, dict):
        raise TypeError(f"{fixture}: parametrise it indirectly with a dict of options, got {given!r}")
    unknown = set(given) - set(defaults)
    if unknown:
        raise TypeError(f"{fixture}: unknown option(s) {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(defaults)}")
    return {**defaults, **given}


def _kernel(rng, d: int, alpha: float, min_eps: float) -> np.ndarray:
    return random_kernel(d, alpha=alpha, eps=min_eps, rng=rng)


@pytest.fixture
def bma_kernel(request, bma_rng) -> np.ndarray:
    """A (d, d) row-stochastic kernel, rows Dirichlet(alpha) mixed so every entry is >= min_eps.

    Options (indirect parametrisation): ``d`` (3), ``alpha`` (1.0), ``min_eps`` (0.01).
    """
    opts = _options(request, KERNEL_DEFAULTS, "bma_kernel")
    return _kernel(bma_rng, opts["d"], opts["alpha"], opts["min_eps"])


@pytest.fixture
def bma_instance(request, bma_rng):
    """A (kernel, parents, init) triple as drawn by ``strategies.instances``: a kernel as ``bma_kernel``, a random
    recursive tree of H positions, and ``init`` None (stationary) or a Dirichlet(1) law of the first token.

    Options (indirect parametrisation): ``d`` (3), ``alpha`` (1.0), ``min_eps`` (0.01), ``H`` (5),
    ``stationary`` (False: a drawn law; True: None), ``min_mass`` (0.0: every entry of init >= min_mass).
    """
    opts = _options(request, INSTANCE_DEFAULTS, "bma_instance")
    kernel = _kernel(bma_rng, opts["d"], opts["alpha"], opts["min_eps"])
    parents = random_parents(opts["H"], rng=bma_rng)
    init = None
    if not opts["stationary"]:
        d, m = opts["d"], float(opts["min_mass"])
        if not 0.0 <= m <= 1.0 / d:
            raise ValueError(f"bma_instance: min_mass must be in [0, 1/d = {1.0 / d:.4g}], got {m}")
        init = (1.0 - d * m) * bma_rng.dirichlet(np.ones(d)) + m
        init = init / init.sum()
    return kernel, parents, init
