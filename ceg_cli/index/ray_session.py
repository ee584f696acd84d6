"""Joining a Ray cluster, or starting Ray on this machine, for a build (``ray_engine``).

``ray`` is imported by the caller (``ray_engine.require_ray``) and passed in.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import UsageError

__all__ = ["check_reachable", "connect"]


def connect(ray: Any, address: str | None) -> bool:
    """Join the cluster at ``address``, or start Ray on this machine; True if we started it.

    A process already connected (a test session, a notebook) is used as it is.
    """
    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    if not address:
        with _token_notice_hidden(), _sigterm_kept():
            ray.init(address="local", include_dashboard=False, **quiet)
        return True
    try:
        with _token_notice_hidden(), _sigterm_kept():
            ray.init(address=address, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--ray-address {address}: cannot join the Ray cluster: {first}") from None
    return True


@contextmanager
def _sigterm_kept() -> Iterator[None]:
    """Keep this process's own SIGTERM handler (``processes.terminate_as_interrupt``)
    through ``ray.init``, which puts in its own: a stack dump and an abort, which
    left the build's workers to Ray and the user with a crash report."""
    import signal
    import threading

    mine = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if callable(mine) and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, mine)


@contextmanager
def _token_notice_hidden() -> Iterator[None]:
    """Drop Ray's notice that token authentication is on (Ray 2.5x), while ``ray.init`` runs.

    It came through ``--quiet``, and it tells the user how to opt out of
    security on a cluster ceg starts and stops itself. Only that notice: Ray's
    other warnings still come through. The filter goes when ``ray.init`` returns.
    """
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")

    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled")

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def check_reachable(address: str) -> None:
    """Fail in seconds, with one line, where no cluster listens (Ray would retry for long).

    The builder calls it before loading the model.
    """
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--ray-address {address}: expected HOST:PORT (the head node's "
                         "address, as `ray start --head` prints it), ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise UsageError(
            f"--ray-address {address}: nothing answers there ({exc.strerror or exc}); start "
            "the cluster with `ray start --head`, or check the address"
        ) from None
