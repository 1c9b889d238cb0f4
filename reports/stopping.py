"""Stop signals (SIGINT from Ctrl-C, SIGTERM from a batch scheduler), standard library only.

Shared by the console script's entry (``reports.entry``, installed before torch is imported) and the executor's
:func:`~bma_verify.reports.executor.stop_on_signals` (which also stops the worker processes): both turn a stop into
:class:`Interrupted` in the main thread, so that the command ends with one line and exit 128 + the signal.
"""
from __future__ import annotations

import os
import signal
from typing import Callable, Sequence

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop asked by signal ``signum`` (SIGINT or SIGTERM).

    A KeyboardInterrupt, so that code which lets Ctrl-C through (joblib, Hypothesis, the report builder) lets it
    through too. The command exits 128 + ``signum``: 130 for SIGINT, 143 for SIGTERM."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def install_stop_handlers(on_stop: Callable[[int], None] = lambda signum: None,
                          signums: Sequence[int] = STOP_SIGNALS) -> dict:
    """Handlers for ``signums`` that ignore further stop signals (one message, however often Ctrl-C is pressed),
    call ``on_stop(signum)`` and raise :class:`Interrupted`. A forked child behaves as it would without them; a
    signal already ignored (``nohup``, a background job of a script) stays ignored. Returns the previous handlers,
    for the caller to restore."""
    owner = os.getpid()
    previous = {s: signal.getsignal(s) for s in signums if signal.getsignal(s) is not signal.SIG_IGN}

    def handler(signum, frame):
        if os.getpid() != owner:  # a forked child: behave as it would without this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        on_stop(signum)
        raise Interrupted(signum)

    for s in previous:
        signal.signal(s, handler)
    return previous
