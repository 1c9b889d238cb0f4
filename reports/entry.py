"""The ``bma-verify`` console script: stop signals handled from the first instruction.

Until ``reports.cli.main`` installs its own handlers (which also stop worker processes, around the work and the
heavy imports of each command), a Ctrl-C or SIGTERM would otherwise end in a KeyboardInterrupt traceback (or a
silent death by signal); here it ends as every stopped command does: one line on stderr and exit 128 + the signal,
with nothing written. This module and ``reports.stopping`` import only the standard library, so the handlers are in
place from the first instruction.
"""
from __future__ import annotations

import signal
import sys

from bma_verify.reports.stopping import Interrupted, install_stop_handlers

_COMMANDS = ("check", "train", "report", "search")


def main(argv=None) -> int:
    """Run ``bma-verify``; a stop signal while starting exits 128 + the signal after one line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if a in _COMMANDS), "")
    try:
        install_stop_handlers()
        from bma_verify.reports.cli import main as run  # the heavy imports
        return run(argv)
    except Interrupted as exc:  # a stop within the command's own handlers is answered by reports.cli.main
        name = signal.Signals(exc.signum).name
        print(f"bma-verify{f' {command}' if command else ''}: stopped by {name} while starting; nothing written",
              file=sys.stderr)
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
