"""The pytest plugin (numerics/pytest_plugin.py, entry point pytest11) works in a project that only installs the
package: pytest is run in a temporary folder, outside this repository (so its conftest.py and pytest settings are
not seen), and the user's tests there use `numerics.strategies`, the fixtures and HYPOTHESIS_PROFILE."""
import json
import os
import random
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
from hypothesis import find, settings

from bma_verify import numerics as nm
from bma_verify.numerics import pytest_plugin
from bma_verify.numerics import strategies as bst
from bma_verify.numerics.task import random_kernel

# The user's test file: it records what it saw in report.json (next to it) for the assertions below.
USER_TESTS = textwrap.dedent('''
    import json
    import pathlib

    import numpy as np
    import pytest
    from hypothesis import given, settings

    from bma_verify.numerics import strategies as bst

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


# The variables by which Hypothesis decides that it runs on a CI server (and then loads its own `ci` profile).
CI_VARIABLES = ("CI", "TF_BUILD", "BUILDKITE", "CIRCLECI", "CIRRUS_CI", "CODEBUILD_BUILD_ID", "GITHUB_ACTIONS",
                "GITLAB_CI", "HEROKU_TEST_RUN_ID", "TEAMCITY_VERSION", "bamboo.buildKey")


def _run_user_project(tmp_path, name, *args, profile=None, ci=None, tests=USER_TESTS):
    """pytest in tmp_path/name holding only the user's test file ``tests``; return (CompletedProcess, report dict).

    ci=None keeps this machine's CI variables; False removes them; True sets CI=true, as a CI server does."""
    project = tmp_path / name
    project.mkdir()
    (project / "test_user.py").write_text(tests)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    env["OMP_NUM_THREADS"] = "1"
    if ci is not None:
        env = {k: v for k, v in env.items() if k not in CI_VARIABLES}
        if ci:
            env["CI"] = "true"
    if profile is not None:
        env["HYPOTHESIS_PROFILE"] = profile
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--rootdir", str(project), *args], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    report = project / "report.json"
    return run, (json.loads(report.read_text()) if report.exists() else {})


@pytest.mark.slow
def test_plugin_in_a_temporary_project(tmp_path):
    # Reference: the profiles as registered by the plugin (PROFILES: bma-thorough 1000 examples, bma-ci 60 and
    # derandomised), the example count Hypothesis ran in the user's @given test, and the fixtures' contracts.
    thorough, seen = _run_user_project(tmp_path, "thorough", profile="bma-thorough")
    assert thorough.returncode == 0, thorough.stdout + thorough.stderr
    assert seen["plugin"] is True
    assert (seen["profile"] == "bma-thorough"
            and seen["max_examples"] == pytest_plugin.PROFILES["bma-thorough"]["max_examples"])
    assert seen["examples"] > 100  # not the bma-ci / bma-dev budget, nor Hypothesis' default or ci (100)
    assert seen["examples"] <= 1000

    ci, seen_ci = _run_user_project(tmp_path, "ci", "--bma-seed", "1", profile="bma-ci")
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert seen_ci["profile"] == "bma-ci" and seen_ci["max_examples"] == 60 and seen_ci["derandomize"] is True
    assert seen_ci["examples"] <= 60
    # the fixtures' Generator is seeded by --bma-seed and the test id: same test, other seed, other kernel
    assert seen_ci["seed"] != seen["seed"] and seen_ci["kernel"] != seen["kernel"]


def test_plugin_refuses_an_unknown_profile_and_keeps_settings_when_unset(tmp_path):
    # Reference: pytest's exit status 4 (usage error) with the known profiles named, instead of silently
    # ignoring the variable.
    bad, _ = _run_user_project(tmp_path, "bad", "-k", "profile", profile="bma-thorogh")
    assert bad.returncode == 4
    assert "bma-thorogh" in bad.stderr and "bma-thorough" in bad.stderr and "Traceback" not in bad.stderr
    unset, seen = _run_user_project(tmp_path, "unset", "-k", "profile_is_loaded or kernel_fixture")
    assert unset.returncode == 0, unset.stdout + unset.stderr
    assert seen["plugin"] is True
    # the fixtures' stream depends only on the test id and --bma-seed (default 0): this kernel is the one the
    # same test would draw in any other run, recomputed here from the documented seeding
    assert seen["seed"] == zlib.crc32(b"test_user.py::test_kernel_fixture")
    expected = random_kernel(3, eps=0.01, rng=np.random.default_rng(seen["seed"]))
    assert np.array_equal(np.array(seen["kernel"]), expected)


@pytest.mark.parametrize("ci", [False, True], ids=["local", "ci-server"])
def test_plugin_leaves_the_settings_alone_when_no_profile_is_named(tmp_path, ci):
    # Reference: the same user project run with the plugin disabled (-p no:bma_verify) in the same environment.
    # On a CI server (CI=true) Hypothesis loads its own `ci` profile (100 examples, derandomised); a plugin that
    # registered a profile of that name would change it (it did: 60 examples), so this fails if it ever does again.
    args = ("-k", "profile_is_loaded")
    on, seen_on = _run_user_project(tmp_path, "on", *args, ci=ci)
    off, seen_off = _run_user_project(tmp_path, "off", *args, "-p", "no:bma_verify", ci=ci)
    assert on.returncode == 0 and off.returncode == 0, on.stdout + on.stderr + off.stdout + off.stderr
    assert seen_on["plugin"] is True and seen_off["plugin"] is False
    assert seen_off["profile"] == ("ci" if ci else "default")  # Hypothesis' own choice, not ours
    for key in ("profile", "max_examples", "derandomize"):
        assert seen_on[key] == seen_off[key], key


def test_this_suite_loads_the_profile_through_the_plugin():
    # Reference: tests/conftest.py no longer registers profiles; the plugin's are the ones loaded here.
    assert set(pytest_plugin.PROFILES) <= set(settings._profiles)
    expected = os.environ.get("HYPOTHESIS_PROFILE") or "bma-dev"
    assert settings.get_current_profile_name() == expected
    assert settings().max_examples == pytest_plugin.PROFILES[expected]["max_examples"]


# A user's property with a planted bug: Lemma 3 with α = 0.05, false wherever information flows. Every call records
# (d, H); the last call is Hypothesis' replay of the shrunk example, the one it prints.
PLANTED_TEST = textwrap.dedent('''
    import json
    import pathlib

    from hypothesis import given, settings

    from bma_verify import numerics as nm
    from bma_verify.numerics import strategies as bst

    REPORT = pathlib.Path(__file__).with_name("report.json")


    @settings(max_examples=300, database=None)
    @given(bst.instances(min_eps=0.01, min_H=3))
    def test_planted_wrong_alpha(instance):
        kernel, parents, init = instance
        REPORT.write_text(json.dumps({"d": kernel.shape[0], "H": parents.shape[0]}))
        h = parents.shape[0] - 1
        for h_prime in range(h):
            if h_prime != parents[h]:
                candidate = nm.mutual_information(nm.pairwise_joint(kernel, parents, h_prime, h, init))
                parent = nm.mutual_information(nm.pairwise_joint(kernel, parents, parents[h], h, init))
                assert candidate <= 0.05 * parent + 1e-12
''')


def test_a_planted_failure_shrinks_to_the_smallest_instance(tmp_path):
    # Reference: the smallest size at which the planted property can fail, d = 2 states and H = 3 positions (the
    # shortest tree with a non-parent candidate for the last position). The strategy draws d in 2..5 and H in 3..8,
    # so a shrinker that cannot lower d or H independently stops higher (it stopped at d = 5, H = 6).
    run, seen = _run_user_project(tmp_path, "planted", tests=PLANTED_TEST, profile="bma-dev")
    printed = "Falsifying example" in run.stdout or "Failing test case" in run.stdout  # Hypothesis' wordings
    assert run.returncode == 1 and printed and "test_planted_wrong_alpha(" in run.stdout, run.stdout + run.stderr
    assert (seen["d"], seen["H"]) == (2, 3)


@pytest.mark.parametrize("seed", range(2))
def test_strategies_shrink_d_and_H_independently(seed):
    # Reference: the smallest (d, H) at which each planted condition holds, found by Hypothesis' own minimiser
    # (hypothesis.find) from two random starts: d = 2 and the smallest H the condition allows.
    conditions = {(2, 4): lambda i: len(i[1]) >= 4 and i[0].max() > 0.8,
                  (2, 5): lambda i: len(i[1]) >= 5 and i[2] is not None,
                  (2, 2): lambda i: nm.dobrushin_coefficient(i[0]) > 0.3}
    for smallest, condition in conditions.items():
        found = find(bst.instances(), condition, settings=settings(database=None, max_examples=1000),
                     random=random.Random(seed))
        assert (found[0].shape[0], found[1].shape[0]) == smallest
