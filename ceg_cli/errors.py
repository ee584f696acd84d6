"""The CegError family and the exit codes a CI job can rely on.

Exceptions are mapped to exit codes in exactly one place (``exit_code_for``):
a gate failure must never be confused with the tool breaking.
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    OK = 0
    GATE_FAILED = 1
    USAGE = 2
    RUNTIME = 3
    INTERRUPTED = 130
    #: Standard output closed by its reader (``ceg ... | head``): the output was cut, as
    #: for a program that SIGPIPE ends (128 + 13).
    STDOUT_CLOSED = 141


class CegError(Exception):
    """An error with a one-line message meant for the user; no traceback."""

    exit_status: ExitStatus = ExitStatus.RUNTIME


class UsageError(CegError):
    """Bad arguments or configuration: the user can fix it by changing the call."""

    exit_status = ExitStatus.USAGE


class InputError(CegError):
    """An input file (corpus, responses) cannot be read as a whole."""

    exit_status = ExitStatus.USAGE


class IndexLoadError(CegError):
    """The index directory is missing, incomplete or incompatible."""

    exit_status = ExitStatus.USAGE


class BackendError(CegError):
    """A backend (model, LLM endpoint) failed at run time."""

    exit_status = ExitStatus.RUNTIME


class DiskFullError(CegError):
    """A write ran out of disk space (or quota); what was written is removed."""

    exit_status = ExitStatus.RUNTIME


class IndexBusyError(CegError):
    """Another process is building the same index right now."""

    exit_status = ExitStatus.RUNTIME


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, KeyboardInterrupt):
        return int(ExitStatus.INTERRUPTED)
    if isinstance(exc, CegError):
        return int(exc.exit_status)
    return int(ExitStatus.RUNTIME)
