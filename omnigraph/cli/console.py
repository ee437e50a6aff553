"""The console scripts' entry point: run a click group, then end the process without interpreter teardown.

After the command has returned (or raised :class:`SystemExit`, as click's standalone mode always
does), :func:`run_script` flushes stdout and stderr, runs the ``atexit`` handlers (logging's
shutdown, ``weakref.finalize`` callbacks such as temporary-directory cleanup and s3fs's session
close, Ray's and multiprocessing's shutdown) and calls ``os._exit`` with the command's status.
What it skips is the interpreter's own teardown: clearing every module and collecting the heap,
the largest part of what a graph command spends after its work (``bench/README.md``,
"Start-up").

Why skipping it loses nothing: every write a command makes is complete when the call making it
returns (a Lance commit, an fsspec ``pipe``/``put`` or a ``with fs.open(...)`` block, a local
put-if-absent with its ``fsync``), and what has reached the operating system stays there however
the process ends; the project opens no Python file it does not close in a ``with`` block; what
teardown would still run are ``__del__`` methods of objects left alive, which Python does not
promise to call at exit. An s3fs session needs no close for what it has
written (each request has completed); its close runs anyway, as a ``weakref.finalize`` callback.
Where the normal exit does more than the teardown, it is used instead: while another non-daemon
thread is alive (the normal exit joins it before the ``atexit`` handlers), when flushing stdout
or stderr fails (a closed pipe: the normal exit reports it and exits 120), and for an exit code
that is not an int or None (Python prints it).

While a script starts, Python's cyclic garbage collector is held off (:func:`hold_collector`):
starting a graph command imports Lance, pyarrow, pydantic and the project's modules, hundreds of
thousands of objects that all stay alive, and each collection during that burst scans them again
to free nothing (40-80 ms of a command's start-up, ``bench/README.md``). Reference counting still
frees everything that is not in a cycle. A command that ends within
:data:`COLLECTOR_HELD_SECONDS` never runs the collector; a longer one (a server, a migration, a
large load) gets it back then: one full collection frees every cycle made so far, what is left
(the imported modules and what the command holds) is moved out of the collector's sight with
``gc.freeze``, and collection resumes on what is allocated after that. The price of the freeze is
bounded and paid once: a cycle among objects frozen then that becomes garbage later is not
collected (reference counting still frees the rest).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import NoReturn

import click

COLLECTOR_HELD_SECONDS = 1.0
"""How long a console script runs without the cyclic collector (module docstring)."""


def run_script(group: click.Group) -> NoReturn:
    """Run ``group`` as its console script (arguments from ``sys.argv``) and end the process with its exit status.

    The process ends by ``os._exit`` after flushing and the ``atexit`` handlers, or by raising
    :class:`SystemExit` where that is not safe (module docstring).
    """
    hold_collector(COLLECTOR_HELD_SECONDS)
    code: object = 0  # kept only if ``main`` returned: standalone mode always raises SystemExit
    try:
        group.main()
    except SystemExit as stop:
        code = stop.code
    fast_exit(code)


def hold_collector(seconds: float) -> None:
    """Disable the cyclic garbage collector now and give it back after ``seconds``, or in a forked child at once.

    It is given back from a daemon timer thread, so a process that ends sooner is not kept waiting.
    """
    gc.disable()
    os.register_at_fork(after_in_child=gc.enable)
    timer = threading.Timer(seconds, resume_collector)
    timer.daemon = True
    timer.start()


def resume_collector() -> None:
    """Collect every cycle made so far, freeze what survives and re-enable the collector.

    Frozen objects move to the collector's permanent generation (``gc.freeze``): never scanned
    again, still freed by reference counting.
    """
    gc.collect()
    gc.freeze()
    gc.enable()


def fast_exit(code: object) -> NoReturn:
    """End the process with ``code`` (a :class:`SystemExit` code), skipping the interpreter's teardown when safe.

    It skips teardown only when nothing but teardown would be skipped; else it raises ``SystemExit(code)``.
    """
    if not (code is None or isinstance(code, int)) or _other_threads_alive() or not _flushed():
        raise SystemExit(code)
    atexit._run_exitfuncs()  # runs each handler once: a normal exit after it finds none left
    if not _flushed():  # what the handlers wrote
        raise SystemExit(code)
    os._exit(code or 0)


def _other_threads_alive() -> bool:
    main = threading.main_thread()
    return any(thread is not main and not thread.daemon and thread.is_alive() for thread in threading.enumerate())


def _flushed() -> bool:
    """Flush stdout and stderr: False if either fails (a closed pipe or stream)."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True
