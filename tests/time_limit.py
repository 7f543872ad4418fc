"""A wall-clock limit for a run inside this process (a fuzz case, a benchmark row), by SIGALRM.

The exception is a BaseException, so no ``except Exception`` in onboard or in a benchmark's own
row handling takes a stopped run for a crash of its own. The alarm lands between Python steps:
one native call that never returns is left to pytest-timeout, which ends the worker.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class TimeLimitExceeded(BaseException):
    """Raised into a run that went past its limit."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise TimeLimitExceeded(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
