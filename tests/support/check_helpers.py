"""``omnigraph check`` for the end of tests that leave a graph behind (migrations, the demo)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omnigraph.engine.storage.store import open_store
from tests.support.graph_helpers import OMNIGRAPH, invoke


def assert_check_clean(uri: str) -> dict[str, Any]:
    """Run ``omnigraph check --json`` in-process; fail with the findings unless it is clean."""
    result = invoke(OMNIGRAPH, "check", "--json", uri)
    assert result.returncode == 0, result.describe()
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["findings"] == [], report
    return report


def tree_digest(uri: str) -> dict[str, str]:
    """Every object under the graph root (relative path) with the sha256 of its bytes.

    Equal digests before and after a command prove it wrote, replaced and deleted nothing.
    """
    store = open_store(uri)
    if not store.fs.exists(store.root):
        return {}
    prefix = store.root.rstrip("/") + "/"
    digests = {}
    for path in sorted(store.fs.find(store.root)):
        with store.fs.open(path, "rb") as handle:
            digests[path[len(prefix) :]] = hashlib.sha256(handle.read()).hexdigest()
    return digests


def assert_check_finds(uri: str, expected_kinds: list[str]) -> dict[str, Any]:
    """Run ``omnigraph check --json`` in-process; it must exit 4 with exactly these finding kinds."""
    result = invoke(OMNIGRAPH, "check", "--json", uri)
    assert result.returncode == 4, result.describe()
    report = json.loads(result.stdout)["error"]["details"]
    assert sorted({finding["kind"] for finding in report["findings"]}) == sorted(expected_kinds), report
    return report
