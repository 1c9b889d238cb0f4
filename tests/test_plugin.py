"""The pytest plugin (numerics/pytest_plugin.py, entry point pytest11) works in a project that only installs the
package: pytest is run in a temporary folder, outside this repository (so its conftest.py and pytest settings are
not seen), and the user's tests there use `numerics.strategies`, the fixtures and HYPOTHESIS_PROFILE."""
import json
import os
import subprocess
import sys
import textwrap
import zlib

import pytest

from numerics import pytest_plugin

# The user's test file: it records what it saw in report.json (next to it) for the assertions below.
USER_TESTS = textwrap.dedent('''
    import json
    import pathlib

    import numpy as np
    import pytest
    from hypothesis import given, settings

    from numerics import strategies as bst

    REPORT = pathlib.Path(__file__).with_name("report.json")
    SEEN = {"examples": 0}


    def record(**values):
        data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
        data.update(values)
        REPORT.write_text(json.dumps(data))


    def test_profile_is_loaded(request):
        record(profile=settings.get_current_profile_name(), max_examples=settings().max_examples,
               derandomize=settings().derandomize,
               plugin=request.config.pluginmanager.has_plugin("bma_verify"))


    @given(bst.kernels(d=2, min_eps=0.01))
    def test_strategy_runs_as_many_examples_as_the_profile_says(kernel):
        SEEN["examples"] += 1
        assert np.allclose(kernel.sum(axis=1), 1.0) and kernel.min() >= 0.01 - 1e-12


    def test_record_the_number_of_examples():  # runs after the test above (pytest keeps the file's order)
        record(examples=SEEN["examples"])


    @settings(max_examples=20)  # an explicit budget still overrides the profile's
    @given(bst.instances(max_d=3, max_H=4, stationary=True))
    def test_instances_keyword_options(instance):
        kernel, parents, init = instance
        assert init is None and parents[0] == -1 and kernel.shape[0] <= 3 and parents.shape[0] <= 4


    def test_strategies_fixture(bma_strategies):
        assert bma_strategies is bst


    def test_kernel_fixture(bma_kernel, bma_rng, bma_seed):
        assert bma_kernel.shape == (3, 3)
        assert np.allclose(bma_kernel.sum(axis=1), 1.0) and bma_kernel.min() >= 0.01 - 1e-12
        record(kernel=bma_kernel.tolist(), seed=bma_seed)


    @pytest.mark.parametrize("bma_kernel", [{"d": 5, "min_eps": 0.1}], indirect=True)
    def test_kernel_fixture_options(bma_kernel):
        assert bma_kernel.shape == (5, 5) and bma_kernel.min() >= 0.1 - 1e-12


    @pytest.mark.parametrize("bma_instance", [{"d": 4, "H": 6, "stationary": True}], indirect=True)
    def test_instance_fixture_stationary(bma_instance):
        kernel, parents, init = bma_instance
        assert kernel.shape == (4, 4) and init is None
        assert parents[0] == -1 and all(0 <= parents[h] < h for h in range(1, 6))


    @pytest.mark.parametrize("bma_instance", [{"min_mass": 0.2}], indirect=True)
    def test_instance_fixture_drawn_law(bma_instance):
        kernel, parents, init = bma_instance
        assert init.shape == (3,) and np.isclose(init.sum(), 1.0) and init.min() >= 0.2 - 1e-12
        assert parents.shape == (5,)
''')


def _run_user_project(tmp_path, name, *args, profile=None):
    """pytest in tmp_path/name holding only the user's test file; return (CompletedProcess, report dict)."""
    project = tmp_path / name
    project.mkdir()
    (project / "test_user.py").write_text(USER_TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    env["OMP_NUM_THREADS"] = "1"
    if profile is not None:
        env["HYPOTHESIS_PROFILE"] = profile
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--rootdir", str(project), *args], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    report = project / "report.json"
    return run, (json.loads(report.read_text()) if report.exists() else {})


@pytest.mark.slow
def test_plugin_in_a_temporary_project(tmp_path):
    # Reference: the profiles as registered by the plugin (PROFILES: thorough 1000 examples, ci 60 and
    # derandomised), the example count Hypothesis ran in the user's @given test, and the fixtures' contracts.
    thorough, seen = _run_user_project(tmp_path, "thorough", profile="thorough")
    assert thorough.returncode == 0, thorough.stdout + thorough.stderr
    assert seen["plugin"] is True
    assert seen["profile"] == "thorough" and seen["max_examples"] == pytest_plugin.PROFILES["thorough"]["max_examples"]
    assert seen["examples"] > pytest_plugin.PROFILES["ci"]["max_examples"]  # not the ci / dev / default budget
    assert seen["examples"] <= 1000

    ci, seen_ci = _run_user_project(tmp_path, "ci", "--bma-seed", "1", profile="ci")
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert seen_ci["profile"] == "ci" and seen_ci["max_examples"] == 60 and seen_ci["derandomize"] is True
    assert seen_ci["examples"] <= 60
    # the fixtures' Generator is seeded by --bma-seed and the test id: same test, other seed, other kernel
    assert seen_ci["seed"] != seen["seed"] and seen_ci["kernel"] != seen["kernel"]


def test_plugin_refuses_an_unknown_profile_and_keeps_settings_when_unset(tmp_path):
    # Reference: pytest's exit status 4 (usage error) with the known profiles named, instead of silently
    # ignoring the variable; with HYPOTHESIS_PROFILE unset Hypothesis' own default profile stays loaded.
    bad, _ = _run_user_project(tmp_path, "bad", "-k", "profile", profile="thorogh")
    assert bad.returncode == 4
    assert "thorogh" in bad.stderr and "thorough" in bad.stderr and "Traceback" not in bad.stderr
    unset, seen = _run_user_project(tmp_path, "unset", "-k", "profile_is_loaded or kernel_fixture")
    assert unset.returncode == 0, unset.stdout + unset.stderr
    assert seen["profile"] == "default" and seen["plugin"] is True
    # the fixtures' stream depends only on the test id and --bma-seed (default 0): this kernel is the one the
    # same test would draw in any other run, recomputed here from the documented seeding
    import numpy as np
    from numerics.task import random_kernel

    assert seen["seed"] == zlib.crc32(b"test_user.py::test_kernel_fixture")
    expected = random_kernel(3, eps=0.01, rng=np.random.default_rng(seen["seed"]))
    assert np.array_equal(np.array(seen["kernel"]), expected)


def test_this_suite_loads_the_profile_through_the_plugin():
    # Reference: tests/conftest.py no longer registers profiles; the plugin's are the ones loaded here.
    from hypothesis import settings

    assert set(pytest_plugin.PROFILES) <= set(settings._profiles)
    expected = os.environ.get("HYPOTHESIS_PROFILE") or "dev"
    assert settings.get_current_profile_name() == expected
    assert settings().max_examples == pytest_plugin.PROFILES[expected]["max_examples"]
