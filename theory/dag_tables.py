"""Symbolic laws and kernel tables of the k-parent DAG task, shared by the set derivations (``ext-dag-*`` claims).

Setting (see :mod:`numerics.dag`): position h has the true parent set T = S_h (k positions, read in position
order) and x_h ~ π(· | x_T) with π = π_k a (D, d) table, D = d**k. Another candidate set S ⊂ {0..h−1} of size k
is made of non-descendants of h, so x_h ⊥ x_S | x_T (the local Markov property of the DAG). The derivations are
built from a symbolic joint r(a, b) = P(x_T = a, x_S = b) over D × D values and a symbolic table π; the only
structural fact used is the Markov property, through Q(b, c) = Σ_a r(a, b) π(c | a) = P(x_S = b, x_h = c).
Overlapping sets are the special case where r vanishes off the pairs that agree on the shared positions.
"""
from __future__ import annotations

import sympy as sp


def joint_table_symbols(name: str, rows: int, cols: int) -> sp.Matrix:
    """A symbolic joint law on rows x cols cells: positive entries, the last one 1 minus the rest."""
    free = [sp.Symbol(f"{name}_{a}_{b}", positive=True) for a in range(rows) for b in range(cols)][:-1]
    return sp.Matrix(rows, cols, [*free, 1 - sp.Add(*free)])


def stochastic_table(name: str, rows: int, d: int) -> sp.Matrix:
    """A symbolic row-stochastic (rows, d) table K[a, c] = K(c | a); each row's last entry is 1 minus the rest."""
    out = []
    for a in range(rows):
        free = [sp.Symbol(f"{name}_{a}_{c}", positive=True) for c in range(d - 1)]
        out.append([*free, 1 - sp.Add(*free)])
    return sp.Matrix(out)
