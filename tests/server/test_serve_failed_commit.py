"""A server whose own commit failed after its table effect landed is not stuck behind it.

The server process is held at ``write.after_effect`` (a real stop, the effect on disk), the
graph's ``__manifest`` is taken away so that the publish fails as it does in a storage outage,
then restored. The failed commit's intent stays (its effect landed), and its writer, the server,
is alive: the next write must resolve it as a dead writer's (the server gave that commit up)
instead of waiting for it until its retries run out.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from omnigraph.engine.failpoints import FAILPOINT_ENV, STOP_SUFFIX
from omnigraph.engine.reconcile.recovery import list_intents
from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, export_text, invoke, make_example_graph, person
from tests.support.serve_helpers import Server, start_fenced


def _load_through_stop(server: Server, name: str, while_stopped: Callable[[], object] | None = None) -> httpx.Response:
    """``POST load`` of one Person; when the server stops at its effect, ``while_stopped()`` runs
    and the server goes on; its answer (also when it answered without reaching the stop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        answer = pool.submit(server.load, [person(name)])
        while not answer.done():
            pid, status = os.waitpid(server.process.pid, os.WUNTRACED | os.WNOHANG)
            if pid and os.WIFSTOPPED(status):
                try:
                    if while_stopped is not None:
                        while_stopped()
                finally:
                    os.kill(server.process.pid, signal.SIGCONT)
                break
            time.sleep(0.02)
        return answer.result(timeout=120)


def test_a_commit_that_failed_after_its_effect_is_resolved_by_the_servers_next_write(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    make_example_graph(uri)
    manifest, away = Path(uri) / "__manifest", Path(uri) / "__manifest.away"
    server = start_fenced(uri, env={FAILPOINT_ENV: "write.after_effect" + STOP_SUFFIX})
    try:
        failed = _load_through_stop(server, "Zed", while_stopped=lambda: manifest.rename(away))
        away.rename(manifest)
        assert failed.status_code >= 500, failed.text
        assert len(list_intents(open_store(uri))) == 1  # its effect landed: the intent stays

        started = time.monotonic()
        landed = _load_through_stop(server, "Yan")
        assert landed.status_code == 200, landed.text
        assert time.monotonic() - started < 30  # resolved at once, not waited for until retries ran out
    finally:
        server.stop()
    exported = export_text(uri)
    assert '"Yan"' in exported and '"Zed"' not in exported
    assert list_intents(open_store(uri)) == []
    check = invoke(OMNIGRAPH, "check", "--json", uri)
    assert check.returncode == 0, check.describe()
