"""The installed package lives under one name, ``bma_verify.*``: a user's project with its own ``model.py``,
``numerics.py`` and ``theory.py`` imports it and runs property tests with its strategies and fixtures, and neither
side shadows the other. Run in a temporary folder outside this repository, with this environment's Python."""
import os
import subprocess
import sys
import textwrap

import pytest

import bma_verify.numerics

# The user's own modules, named as ours once were: a package that imported ``numerics`` or ``model`` by their bare
# names would get these instead (and fail on the marker).
USER_MODULES = {name: f'"""The user\'s own {name}.py."""\nOWNER = "user"\n' for name in ("model", "numerics", "theory")}

USER_TESTS = textwrap.dedent('''
    import numpy as np
    from hypothesis import given

    import model
    import numerics
    from bma_verify import numerics as bma_numerics
    from bma_verify.numerics import strategies as bst
    from bma_verify.reports.registry import CLAIM_IDS


    def test_the_user_modules_and_the_package_are_apart():
        assert model.OWNER == "user" and numerics.OWNER == "user"
        assert not hasattr(bma_numerics, "OWNER") and "lemma3-strict-dpi" in CLAIM_IDS


    @given(bst.instances(max_d=3, max_H=5, min_eps=0.01))
    def test_posterior_rows_are_laws_on_drawn_instances(instance):
        kernel, parents, init = instance
        batch = bma_numerics.sample_task(kernel, 2, 3, parents.shape[0], rng=np.random.default_rng(0), init=init)
        rows = bma_numerics.parent_posterior(kernel, batch.context)[:, 1:].sum(axis=-1)
        assert np.allclose(rows, 1.0)


    def test_plugin_fixtures(bma_kernel, bma_instance, bma_strategies):
        assert np.allclose(bma_kernel.sum(axis=1), 1.0) and bma_strategies is bst
        kernel, parents, init = bma_instance
        assert parents[0] == -1 and kernel.shape == (3, 3)
''')


def _user_project(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name, text in USER_MODULES.items():
        (project / f"{name}.py").write_text(text)
    (project / "test_user.py").write_text(USER_TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    env["OMP_NUM_THREADS"] = "1"
    return project, env


def test_the_package_imports_beside_a_users_model_and_numerics(tmp_path):
    # Reference: the package's own files (this checkout), whatever the user's folder holds
    project, env = _user_project(tmp_path)
    code = ("import bma_verify.numerics, bma_verify.model, bma_verify.reports.registry, numerics, model; "
            "print(bma_verify.numerics.__file__); print(numerics.__file__)")
    run = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    ours, theirs = run.stdout.split()
    assert ours == bma_verify.numerics.__file__ and theirs == str(project / "numerics.py")


@pytest.mark.slow
def test_a_users_property_tests_run_with_the_packages_strategies_and_fixtures(tmp_path):
    # Reference: pytest's own exit status (0: every test of the user's file passed) and its count of passes
    project, env = _user_project(tmp_path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--rootdir", str(project)], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout, run.stdout
