"""One torch thread per test (small models run fastest so, and `make test` runs one worker per core).

The Hypothesis settings profiles bma-dev, bma-ci and bma-thorough come from the package's pytest plugin
(numerics/pytest_plugin.py, loaded through its `pytest11` entry point), which also loads HYPOTHESIS_PROFILE;
this suite defaults to `bma-dev` when HYPOTHESIS_PROFILE is unset (`make test` uses `bma-ci`)."""
import os
from pathlib import Path

from bma_verify.reports.float_path import pin

pin()  # before torch loads: the float path the reference report was made on (reports/float_path.py)

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings

if not os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile("bma-dev")  # registered by the plugin, imported before any conftest


#: Test files that take longest, longest first (`make test` on a fresh clone of 2026-12-07, idle machine, with
#: `PYTEST_ADDOPTS=--durations=14`: the trained regression reruns 271, 164 and 92 s, task-shaped 52 + 31 s, the report
#: builder 37 + 16 + 10 s). `make test` hands files to its two workers in collection order (`--dist loadfile
#: --no-loadscope-reorder`), so these go first and the short files fill in behind them, instead of one worker
#: finishing a long file alone at the end. The order changes only the wall time, never a result.
LONGEST_FIRST = ("test_regression_trained_robustness.py", "test_regression_trained_fig2_run.py",
                 "test_regression_trained_others.py", "test_model_task_shaped.py", "test_report_builder.py",
                 "test_presets.py", "test_plugin.py", "claims/test_prop2_ds_quadratic.py")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    rank = {(here / name).resolve(): i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.path).resolve(), len(rank)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
