"""One floating-point path for torch on every x86 machine with AVX2, so that a trained run gives the same numbers
on this machine and another of its kind.

A trained run is a long chain of float operations; where a seed sits near a transition (a plateau before the
loss drops), the last bits of one matmul decide whether it drops in this run's budget. The CPU path that torch
takes moves those bits: ATen's vector kernels (``ATEN_CPU_CAPABILITY``: default, avx2, avx512) and MKL's code path
(picked per processor). Measured: fig2's quick run set read different verdicts under avx2 and avx512
(docs/notes/trained-checks.md). So commands and the test suite pin both paths to AVX2, the widest that every
x86-64 machine of the last decade runs: ATen by ``ATEN_CPU_CAPABILITY=avx2`` and MKL by
``MKL_ENABLE_INSTRUCTIONS=AVX2`` (``MKL_CBWR=AVX2`` gives the same numbers here at about 1.5× the time). A value
already in the environment is kept, and results.json records what was used. Both are read when torch loads, so
:func:`pin` must run before the first ``import torch`` of the process.
"""
from __future__ import annotations

import os
import sys

#: The environment that fixes torch's CPU float path, and its values.
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def pin(environ=os.environ) -> dict:
    """Set each of ``PINNED`` that the environment does not already set; the values in force. Raises RuntimeError
    when torch is already loaded in this process and a value would change (it would not take effect)."""
    missing = {k: v for k, v in PINNED.items() if k not in environ}
    if missing and environ is os.environ and "torch" in sys.modules:
        raise RuntimeError(f"torch is already imported; set {', '.join(f'{k}={v}' for k, v in missing.items())} "
                           "before it loads")
    for key, value in missing.items():
        environ[key] = value
    return in_force(environ)


def in_force(environ=os.environ) -> dict:
    """The float-path variables as the environment sets them (None where unset)."""
    return {key: environ.get(key) for key in PINNED}


#: The instruction sets that decide which code paths torch's libraries may take.
_ISA = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_identity(cpuinfo: str | None = None) -> str | None:
    """The processor a report ran on, as ``vendor family/model: model name [ISA flags]`` (from /proc/cpuinfo; None
    where there is none). Pinning the paths above does not make MKL's numbers the same on another vendor's processor
    (measured: docs/notes/trained-checks.md), so a trained regression compares verdicts strictly only on the
    reference's processor (``reports.regression.compare_results``)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return None
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if not key.strip():
            break  # the first processor's block is enough
        fields.setdefault(key.strip(), value.strip())
    if "vendor_id" not in fields:
        return None
    flags = [f for f in _ISA if f in set(fields.get("flags", "").split())]
    return (f"{fields['vendor_id']} {fields.get('cpu family', '?')}/{fields.get('model', '?')}: "
            f"{fields.get('model name', '?')} [{' '.join(flags)}]")
