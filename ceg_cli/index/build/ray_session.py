"""Joining a Ray cluster, or starting Ray on this machine, for a build (``ray_engine``).

``ray`` is imported by the caller (``ray_engine.require_ray``) and passed in.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import UsageError

__all__ = ["check_reachable", "connect", "short_temp_dir"]


def connect(ray: Any, address: str | None) -> Callable[[], None]:
    """Join the cluster at ``address``, or start Ray on this machine; returns what to call
    when the build ends (nothing happens for a Ray this process was already connected to:
    a test session, a notebook, used as it is).

    Ray started here keeps its session in a folder ceg makes for it, ``/tmp/ceg-ray-XXXX``
    (``short_temp_dir``), removed by the returned call after Ray has stopped.
    """
    if ray.is_initialized():
        return lambda: None
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    if not address:
        temp = short_temp_dir()
        try:
            with _token_notice_hidden(), _sigterm_kept():
                ray.init(address="local", include_dashboard=False, _temp_dir=str(temp),
                         **quiet)
        except BaseException:
            _remove(temp)
            raise

        def stop() -> None:
            try:
                ray.shutdown()
            finally:
                _remove(temp)

        return stop
    try:
        with _token_notice_hidden(), _sigterm_kept():
            ray.init(address=address, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--ray-address {address}: cannot join the Ray cluster: {first}") from None
    return ray.shutdown


def short_temp_dir() -> Path:
    """A new folder for a Ray session, private (0700) and with a short path.

    Ray's default is ``$TMPDIR/ray``, and it puts Unix sockets at
    ``TEMP/session_<date>_<time>_<pid>/sockets/plasma_store``: about 70 bytes under TEMP,
    where a socket path may hold at most 107 (Linux; 103 on macOS). A ``TMPDIR`` of 40
    characters (a CI runner's, pytest's) is enough for Ray not to start: "AF_UNIX path
    length cannot exceed 107 bytes". ``/tmp`` is used where it exists, whatever ``TMPDIR``
    says; the index's path plays no part.
    """
    root = "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK) else None
    return Path(tempfile.mkdtemp(prefix="ceg-ray-", dir=root))


def _remove(temp: Path) -> None:
    """The session folder ceg made, with what Ray wrote in it (its logs, its sockets)."""
    shutil.rmtree(temp, ignore_errors=True)


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
