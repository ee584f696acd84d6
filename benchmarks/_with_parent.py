"""Run a program that ends when the benchmark that started it does.

    python benchmarks/_with_parent.py PARENT_PID PROGRAM [ARG ...]

A benchmark's children (a ``ceg index build`` it times, the llama.cpp server it
measures) were left running under PID 1 when the benchmark was killed with
SIGKILL: nothing told them. This asks Linux to SIGKILL this process when its
parent dies (``PR_SET_PDEATHSIG``, which ``exec`` keeps), then becomes PROGRAM:
same process id, so the benchmark's ``wait4`` and memory readings see PROGRAM
itself. Exit 1 without running PROGRAM when PARENT_PID is already gone; where
the request cannot be made (not Linux), PROGRAM runs as before. Ctrl-C is left
to the benchmark, as ``_common.ends_with_parent`` leaves it (the build's readers'
rule): PROGRAM starts with SIGINT ignored (``exec`` keeps that too), and the
benchmark, stopped by it, ends PROGRAM (``subprocess.run`` kills its child, a
``finally`` stops it, or the parent-death signal does), so no child prints a
traceback of its own. ``_common.with_parent`` builds the command line.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit(f"usage: {sys.argv[0]} PARENT_PID PROGRAM [ARG ...]")
    from ceg_cli.index.build.processes import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != int(sys.argv[1]):  # gone before the kernel was asked
        sys.exit(1)
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
