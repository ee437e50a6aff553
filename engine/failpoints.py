"""Named failpoints: a hard process exit (or a stop) at a named step, for crash and race tests.

``OMNIGRAPH_FAILPOINTS`` holds a comma-separated list of names. When code reaches
``failpoint(name)`` for a listed name, the process writes one line to stderr and exits at once
with status :data:`FAILPOINT_EXIT_STATUS` through ``os._exit``: no ``finally`` blocks, no atexit
handlers, no flushing of Python buffers, exactly like a killed process.

A name listed as ``name:stop`` stops the process instead (``SIGSTOP`` to itself): it stays
alive, holding what it holds, until another process sends it ``SIGCONT``, and then goes on as if
the failpoint were not armed. The parent sees the stop with ``os.waitpid(pid, os.WUNTRACED)``.
This is how a test or the demo holds one writer between two steps of its commit while another
writer runs, to produce an interleaving a race only sometimes produces.

With ``OMNIGRAPH_FAILPOINTS_ONCE`` naming a directory, each armed failpoint acts at most once
among all the processes that share that directory: the first to reach it creates
``<dir>/<name>`` (holding its pid) and exits or stops; every later arrival goes on. This is how a
test stops exactly one worker of a multi-process server, and finds which one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")

FAILPOINT_ENV = "OMNIGRAPH_FAILPOINTS"
FAILPOINT_ONCE_ENV = "OMNIGRAPH_FAILPOINTS_ONCE"
FAILPOINT_EXIT_STATUS = 86
STOP_SUFFIX = ":stop"


def armed_failpoints() -> frozenset[str]:
    """The failpoint entries armed in this process's environment (``name`` or ``name:stop``)."""
    raw = os.environ.get(FAILPOINT_ENV, "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def _first_arrival(name: str) -> bool:
    """True unless a once-directory is set and another process already reached failpoint ``name``."""
    directory = os.environ.get(FAILPOINT_ONCE_ENV)
    if not directory:
        return True
    try:
        handle = os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(handle, "w") as marker:
        marker.write(str(os.getpid()))
    return True


def failpoint(name: str) -> None:
    """Hard-exit the process if ``name`` is armed, stop it if ``name:stop`` is; else nothing."""
    armed = armed_failpoints()
    if (name in armed or name + STOP_SUFFIX in armed) and not _first_arrival(name):
        return
    if name in armed:
        sys.stderr.write(f"failpoint {name}: exiting\n")
        sys.stderr.flush()
        os._exit(FAILPOINT_EXIT_STATUS)
    if name + STOP_SUFFIX in armed:
        sys.stderr.write(f"failpoint {name}: stopped until SIGCONT\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSTOP)


def wait_until_stopped(pid: int) -> None:
    """Block until child ``pid`` stops at a ``name:stop`` failpoint; ``ChildProcessError`` if it ended instead.

    Resume it with ``os.kill(pid, signal.SIGCONT)``.
    """
    _, status = os.waitpid(pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        raise ChildProcessError(f"process {pid} ended (wait status {status}) before reaching its stop failpoint")


def run_held(
    argv: list[str], name: str, during: Callable[[], T], env: Mapping[str, str] | None = None, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], T]:
    """Run ``argv`` held at failpoint ``name`` while ``during()`` runs, then let it finish.

    The process starts with ``env`` (default: this process's environment) with only
    ``name:stop`` armed. Once it has stopped there, ``during()`` is called; then the process is
    resumed (also if ``during`` raised) and waited for. Returns the held process's result (text
    output) and what ``during`` returned. Raises ``ChildProcessError`` if the process ended
    before reaching the failpoint.
    """
    base = {key: value for key, value in (os.environ if env is None else env).items() if key != FAILPOINT_ENV}
    held = subprocess.Popen(
        argv, env={**base, FAILPOINT_ENV: name + STOP_SUFFIX}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until_stopped(held.pid)
    except ChildProcessError:
        held.communicate(timeout=timeout)  # already reaped: only drains and closes its pipes
        raise
    try:
        result = during()
    finally:
        held.send_signal(signal.SIGCONT)
        out, err = held.communicate(timeout=timeout)
    return subprocess.CompletedProcess(argv, held.returncode, out, err), result
