"""Tests of reports/float_path.py: commands and this suite run torch on the AVX2 float path, so a trained run gives
the numbers of reports/reference on every x86 machine with AVX2.

References: torch's own report of the ATen kernels in use (`torch.backends.cpu.get_cpu_capability`) and a fresh
interpreter started without the variables.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from bma_verify.reports import float_path


def test_this_suite_runs_torch_on_the_pinned_path():
    # conftest pins before torch loads; a user's own setting is kept, so compare with what is in force
    assert os.environ["ATEN_CPU_CAPABILITY"] == float_path.in_force()["ATEN_CPU_CAPABILITY"]
    if os.environ["ATEN_CPU_CAPABILITY"] == float_path.PINNED["ATEN_CPU_CAPABILITY"]:
        assert torch.backends.cpu.get_cpu_capability() == "AVX2"


def test_pin_sets_only_what_is_missing_and_refuses_once_torch_is_loaded(monkeypatch):
    environ = {"ATEN_CPU_CAPABILITY": "default"}
    assert float_path.pin(environ) == {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    with pytest.raises(RuntimeError, match="torch is already imported; set MKL_ENABLE_INSTRUCTIONS=AVX2"):
        float_path.pin()  # this process loaded torch: a value set now would not take effect


def test_a_command_pins_the_path_before_torch_loads():
    # a fresh interpreter without the variables: the CLI's entry sets them before any torch import
    env = {k: v for k, v in os.environ.items() if k not in float_path.PINNED}
    code = ("import sys\nfrom bma_verify.reports import cli\nsys.argv = ['bma-verify', 'check', '--list']\n"
            "cli.main()\nimport torch\nprint(torch.backends.cpu.get_cpu_capability())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "AVX2"
