"""The console scripts end by ``os._exit`` after the command (:mod:`omnigraph.cli.console`), and lose nothing by it.

* Each console script, run as installed, prints exactly what the same click group prints, with
  the same exit status, when the interpreter ends normally instead (``python -c ... cli()``):
  results, ``--json`` documents and help on a pipe, and the error paths (not found, usage, format
  refused, bad records, key conflict).
* A ``load`` followed by a new process's ``snapshot`` and ``export`` sees every row, on a local
  root and on S3 (moto), so nothing a write made waits for the interpreter's teardown.
* :func:`omnigraph.cli.console.fast_exit` runs the ``atexit`` handlers, flushes what is buffered and skips
  the teardown (a ``__del__`` left at exit does not run); it leaves the ending to Python, by
  raising :class:`SystemExit`, while another non-daemon thread is alive, when stdout cannot be
  flushed, and for a code that is not an int.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import omnigraph
from tests.support.graph_helpers import BIN, DATA_PATH, SCHEMA_PATH

SCRIPTS = {
    "omnigraph": "omnigraph.cli.omnigraph",
    "omnigraph-v4": "omnigraph.cli.omnigraph_v4",
    "omnigraph-migrate": "omnigraph.cli.migrate",
}
# The same group, ending the way a Python program ends: module teardown included.
NORMAL_EXIT = """
import sys
from importlib import import_module
module = sys.argv.pop(1)
sys.argv[0] = sys.argv.pop(1)
import_module(module).cli()
"""


def _buffered() -> dict[str, str]:
    """The environment with stdout block-buffered on a pipe, as it is unless PYTHONUNBUFFERED is
    set: what is printed waits in the buffer for the exit's flush."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def _completed(argv: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(argv, capture_output=True, text=True, env=_buffered(), timeout=180, check=False)
    return done.returncode, done.stdout, done.stderr


def _both(program: str, *args: str | Path) -> tuple[int, str, str]:
    """``program args`` as the console script and with a normal exit: the same status, stdout and
    stderr (returned)."""
    texts = [str(arg) for arg in args]
    fast = _completed([str(BIN / program), *texts])
    normal = _completed([sys.executable, "-c", NORMAL_EXIT, SCRIPTS[program], program, *texts])
    assert fast == normal
    return fast


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example graph at format 5 (``g5``) and 4 (``g4``); a new row, an existing one and a bad
    one, each in a JSONL file."""
    root = tmp_path_factory.mktemp("console-exit")
    for name, program in (("g5", omnigraph.ENGINE), ("g4", omnigraph.FORMAT_4_WRITER)):
        with omnigraph.init(root / name, SCHEMA_PATH, program=program) as graph:
            graph.load(DATA_PATH, mode="append")
    (root / "one.jsonl").write_text(json.dumps({"type": "Person", "data": {"name": "Zoe", "age": 7}}) + "\n", encoding="utf-8")
    (root / "dup.jsonl").write_text(json.dumps({"type": "Person", "data": {"name": "Alice", "age": 1}}) + "\n", encoding="utf-8")
    (root / "bad.jsonl").write_text(json.dumps({"type": "Nope", "data": {}}) + "\n", encoding="utf-8")
    return {name: root / name for name in ("g5", "g4", "one.jsonl", "dup.jsonl", "bad.jsonl")}


def test_piped_output_is_complete(graphs: dict[str, Path]) -> None:
    g5, g4 = graphs["g5"], graphs["g4"]
    assert _both("omnigraph", "--help")[1].startswith("Usage: omnigraph [OPTIONS] COMMAND [ARGS]...")
    assert _both("omnigraph", "version")[1].startswith("omnigraph ")
    code, out, _ = _both("omnigraph", "snapshot", "--json", g5)
    assert code == 0 and sum(table["rows"] for table in json.loads(out)["tables"]) == 41
    code, out, _ = _both("omnigraph", "export", g5)
    with omnigraph.open(g5, read_only=True) as graph:
        assert code == 0 and out.splitlines() == list(graph.export_jsonl())
    code, out, _ = _both("omnigraph-migrate", "status", "--json", g4)
    assert code == 0 and json.loads(out)["stamp"] == "4"
    assert _both("omnigraph-migrate", "preflight", g4)[0] == 0


def test_the_error_paths_keep_their_exit_codes(graphs: dict[str, Path], tmp_path: Path) -> None:
    g5, g4 = graphs["g5"], graphs["g4"]
    missing = tmp_path / "missing"
    code, out, err = _both("omnigraph", "snapshot", "--json", missing)
    assert code == 1 and json.loads(out)["error"]["code"] == "not_found" and "error [not_found]" in err
    assert _both("omnigraph", "snapshot")[0] == 2
    assert _both("omnigraph", "load", "--mode", "bogus", "--data", graphs["one.jsonl"], g5)[0] == 2
    assert _both("omnigraph", "load", "--mode", "append", "--data", graphs["one.jsonl"], g4)[0] == 6
    assert _both("omnigraph", "load", "--mode", "append", "--data", graphs["bad.jsonl"], g5)[0] == 1
    code, _, err = _both("omnigraph", "load", "--mode", "append", "--data", graphs["dup.jsonl"], g5)
    assert code == 1 and "error [key_conflict]" in err
    assert _both("omnigraph-migrate", "preflight", g5)[0] == 6
    assert _both("omnigraph-migrate", "status", missing)[0] == 1


def test_a_load_is_seen_by_the_next_process(root_uri: str) -> None:
    uri = root_uri
    lines = DATA_PATH.read_text(encoding="utf-8").splitlines()

    def cli(*args: str | Path) -> str:
        code, out, err = _completed([str(BIN / "omnigraph"), *map(str, args)])
        assert code == 0, err
        return out

    cli("init", "--schema", SCHEMA_PATH, uri)
    cli("load", "--mode", "append", "--data", DATA_PATH, uri)
    snapshot = json.loads(cli("snapshot", "--json", uri))
    assert snapshot["manifest_version"] == 2 and sum(table["rows"] for table in snapshot["tables"]) == len(lines)
    assert len(cli("export", uri).splitlines()) == len(lines)


# A program that ends with fast_exit(CODE): "teardown ran" is printed only by the interpreter's
# teardown, so the output tells the fast exit (without it) from the normal one (with it).
ENDING = """
import atexit, sys, threading
from omnigraph.cli.console import fast_exit

class Teardown:
    def __del__(self):
        print("teardown ran")

kept = Teardown()
atexit.register(print, "atexit ran")
release = threading.Event()
if "--thread" in sys.argv:
    threading.Thread(target=release.wait, args=(2,)).start()
print("buffered", end=" ")
fast_exit(CODE)
"""


def _ending(code: str, *args: str, stdout: int | None = subprocess.PIPE) -> tuple[int, str | None, str]:
    done = subprocess.run(
        [sys.executable, "-c", ENDING.replace("CODE", code), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=_buffered(),
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_fast_exit_runs_the_atexit_handlers_and_skips_the_teardown() -> None:
    assert _ending("4") == (4, "buffered atexit ran\n", "")
    assert _ending("None") == (0, "buffered atexit ran\n", "")


def test_fast_exit_leaves_the_end_to_python_while_another_thread_runs() -> None:
    assert _ending("3", "--thread") == (3, "buffered atexit ran\nteardown ran\n", "")


def test_fast_exit_leaves_the_end_to_python_for_a_text_code() -> None:
    assert _ending("'a message'") == (1, "buffered atexit ran\nteardown ran\n", "a message\n")


def test_fast_exit_leaves_the_end_to_python_when_stdout_is_a_closed_pipe() -> None:
    """Python reports the unflushed output and exits 120, as it does without the fast exit."""
    read, write = os.pipe()
    os.close(read)
    try:
        code, _, err = _ending("0", stdout=write)
    finally:
        os.close(write)
    assert code == 120 and "BrokenPipeError" in err


HELD = """
import gc, os, time, weakref
import click
from omnigraph.cli import console

class Node:
    pass

@click.command()
def held() -> None:
    assert not gc.isenabled(), "the collector runs while the script starts"
    pid = os.fork()
    if pid == 0:
        os._exit(0 if gc.isenabled() else 3)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "a forked child has no collector"
    cycle = Node()
    cycle.self = cycle
    dead = weakref.ref(cycle)
    del cycle
    assert dead() is not None  # only the collector frees a cycle
    deadline = time.monotonic() + 30
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gc.isenabled(), "the collector was not given back"
    assert dead() is None, "a cycle made while it was held was frozen instead of freed"
    assert gc.get_freeze_count() > 0
    print("given back")

console.COLLECTOR_HELD_SECONDS = 0.2
console.run_script(held)
"""


def test_a_script_starts_without_the_collector_and_gets_it_back_after_freeing_its_cycles() -> None:
    """:func:`omnigraph.cli.console.run_script` holds the cyclic collector off while the command starts, then
    gives it back after one collection and ``gc.freeze``; a forked child gets it at once."""
    done = subprocess.run([sys.executable, "-c", HELD], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "given back\n"), done.stderr
