"""One torch thread per test (small models run fastest so, and `make test` runs one worker per core).

The Hypothesis settings profiles bma-dev, bma-ci and bma-thorough come from the package's pytest plugin
(numerics/pytest_plugin.py, loaded through its `pytest11` entry point), which also loads HYPOTHESIS_PROFILE;
this suite defaults to `bma-dev` when HYPOTHESIS_PROFILE is unset (`make test` uses `bma-ci`)."""
import os

import pytest
import torch
from hypothesis import settings

if not os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile("bma-dev")  # registered by the plugin, imported before any conftest


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
