"""Opening a graph fixes glibc's mmap threshold, so big freed blocks go back to the system.

Each case runs in a fresh Python process (the setting is the process's, set once): it opens a
graph, mallocs 8 MiB, frees it, mallocs 8 MiB again and reports glibc's ``mallinfo2().hblkhd``
(bytes in mmapped blocks) while the second block is held. glibc left alone raises its threshold
when the first block is freed, so the second comes from its heap (``hblkhd`` below 8 MiB) and
stays resident once freed; with the threshold fixed it is a mapping of its own again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.graph_helpers import SCHEMA_PATH, omnigraph

BLOCK = 8 * 1024 * 1024

PROBE = f"""
import ctypes, json, sys
import omnigraph

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
try:
    omnigraph.open(sys.argv[1], read_only=True)
except omnigraph.BadRequest as error:
    print(json.dumps({{"error": str(error)}}))
    raise SystemExit(0)
libc.free(libc.malloc({BLOCK}))
held = libc.malloc({BLOCK})
print(json.dumps({{"mmapped": libc.mallinfo2().hblkhd}}))
libc.free(held)
"""


@pytest.fixture(scope="module")
def graph_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("allocator") / "graph"
    omnigraph("init", root, "--schema", SCHEMA_PATH).ok()
    return root


def _probe(root: Path, **env: str) -> dict[str, object]:
    environment = {key: value for key, value in os.environ.items() if key not in ("OMNIGRAPH_MMAP_THRESHOLD_KB", "MALLOC_MMAP_THRESHOLD_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(root)], env={**environment, **env}, capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_opening_a_graph_maps_big_blocks_again_after_one_is_freed(graph_root: Path) -> None:
    mmapped = _probe(graph_root)["mmapped"]
    assert isinstance(mmapped, int) and mmapped >= BLOCK


def test_zero_leaves_the_allocator_alone(graph_root: Path) -> None:
    mmapped = _probe(graph_root, OMNIGRAPH_MMAP_THRESHOLD_KB="0")["mmapped"]
    assert isinstance(mmapped, int) and mmapped < BLOCK


def test_a_threshold_above_the_block_keeps_it_on_the_heap(graph_root: Path) -> None:
    mmapped = _probe(graph_root, OMNIGRAPH_MMAP_THRESHOLD_KB=str(16 * 1024))["mmapped"]
    assert isinstance(mmapped, int) and mmapped < BLOCK


def test_glibcs_own_setting_wins(graph_root: Path) -> None:
    mmapped = _probe(graph_root, MALLOC_MMAP_THRESHOLD_=str(16 * 1024 * 1024))["mmapped"]
    assert isinstance(mmapped, int) and mmapped < BLOCK


@pytest.mark.parametrize("value", ["lots", "-1", "1.5", str(32 * 1024 + 1)])
def test_a_bad_value_is_refused_naming_the_variable(graph_root: Path, value: str) -> None:
    error = _probe(graph_root, OMNIGRAPH_MMAP_THRESHOLD_KB=value)["error"]
    assert isinstance(error, str) and "OMNIGRAPH_MMAP_THRESHOLD_KB" in error and repr(value) in error


def test_the_cli_refuses_a_bad_value_and_runs_once_it_is_unset(graph_root: Path) -> None:
    refused = omnigraph("snapshot", graph_root, env={"OMNIGRAPH_MMAP_THRESHOLD_KB": "lots"})
    assert refused.returncode == 1 and "OMNIGRAPH_MMAP_THRESHOLD_KB" in refused.stderr, refused.describe()
    omnigraph("snapshot", graph_root).ok()
