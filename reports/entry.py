"""The ``bma-verify`` console script: stop signals handled from the first instruction.

Importing the command (torch, SciPy, SymPy) takes a second or two. A Ctrl-C or SIGTERM in that time would otherwise
end in a KeyboardInterrupt traceback (or a silent death by signal); here it ends as every stopped command does: one
line on stderr and exit 128 + the signal, with nothing written. This module imports only the standard library, so
its handlers are in place before anything heavy is imported; ``reports.cli.main`` installs its own (which stop
worker processes) around the work itself.
"""
from __future__ import annotations

import os
import signal
import sys

_COMMANDS = ("check", "train", "report", "search")


class StoppedAtStart(KeyboardInterrupt):
    """SIGINT or SIGTERM before the command's own handlers were installed (importing it, parsing its options)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def _install(signums=(signal.SIGINT, signal.SIGTERM)) -> dict:
    """Handlers raising :class:`StoppedAtStart`; a signal already ignored (``nohup``, a background job) stays
    ignored. Returns the previous handlers."""
    owner = os.getpid()
    previous = {s: signal.getsignal(s) for s in signums if signal.getsignal(s) is not signal.SIG_IGN}

    def handler(signum, frame):
        if os.getpid() != owner:  # a forked child: behave as it would without this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        for s in previous:  # one line however often the user presses Ctrl-C
            signal.signal(s, signal.SIG_IGN)
        raise StoppedAtStart(signum)

    for s in previous:
        signal.signal(s, handler)
    return previous


def main(argv=None) -> int:
    """Run ``bma-verify``; a stop signal while starting exits 128 + the signal after one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if a in _COMMANDS), "")
    try:
        _install()
        from bma_verify.reports.cli import main as run  # the heavy imports
        return run(argv)
    except StoppedAtStart as exc:
        name = signal.Signals(exc.signum).name
        print(f"bma-verify{f' {command}' if command else ''}: stopped by {name} while starting; nothing written",
              file=sys.stderr)
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
