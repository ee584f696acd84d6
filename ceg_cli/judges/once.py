"""Something a judge says once a run, where the run's warnings go.

A judge that has a word for the user (an English-only checker shown German, an
endpoint without log-probabilities, evidence in another language) says it on
the first occasion only, from whichever thread judges first: to ``on_warning``
(the run's warnings: stderr, the summary, a Ray worker's report), else as a
Python ``RuntimeWarning``.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable


class SayOnce:
    def __init__(self, on_warning: Callable[[str], None] | None = None) -> None:
        self.on_warning = on_warning
        self._said = False
        self._lock = threading.Lock()

    @property
    def said(self) -> bool:
        return self._said

    def say(self, message: str, stacklevel: int = 2) -> bool:
        """Say ``message`` unless something was said before; whether it was said now.
        ``stacklevel`` as ``warnings.warn`` counts it from the caller of ``say``."""
        with self._lock:
            if self._said:
                return False
            self._said = True
        if self.on_warning is not None:
            self.on_warning(message)
        else:
            warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
        return True
