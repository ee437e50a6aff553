"""Hostile input: random and mutated documents end in a typed error and write nothing.

Every input the CLIs read from an operator or from storage is fed random bytes, mutations of a
valid document, and the classic hostile shapes (invalid UTF-8, NUL bytes, a 10 MB single line,
deep JSON/YAML nesting): the `.pg` parser (``init``), the JSONL loader (``load``), the playbook
loader (``playbook run``), the decisions file (``repair``) and the ledger reader (``status`` and
``resume``). The property: either the command succeeds on input that is in fact valid, or it
exits 1 or 4 with a typed error code (never ``internal``, never a traceback), and every object
under the graph root is byte-identical afterwards. Commands run in-process (click's runner)
so that a few hundred examples stay within seconds; example counts are bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from omnigraph.engine.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from omnigraph.migrator.layout import ledger_dir
from omnigraph.migrator.repair import DecisionsFile
from omnigraph.playbooks.model import Playbook
from tests.conftest import _free_loopback_port, _wait_for_port, s3_server_command
from tests.support.check_helpers import assert_check_clean, tree_digest
from tests.support.graph_helpers import OMNIGRAPH, PROJECT, export_text, invoke, make_example_graph
from tests.support.migration_cli import claim_token
from tests.support.migration_fixtures import BIN, build_fixture
from tests.support.out_of_band import append_unfenced

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
TEN_MB = 10 * 1024 * 1024
HOSTILE_BLOBS = [
    b"\xff\xfe\xfd invalid utf-8 \xc3\x28",
    b"node P { name: String @key }\x00\x00",
    b"[" * 100_000 + b"]" * 100_000,
    b"{" + b'"a":{' * 50_000 + b"}" * 50_001,
    b"x" * TEN_MB,
    b'{"type": "Person", "data": {"name": "' + b"y" * TEN_MB,
    b"- " * 50_000 + b"x",
    b"",
]
TYPED_EXITS = (1, 4)


def run_migrate(*args: Any) -> tuple[int, str, str]:
    """``omnigraph-migrate`` in-process: (exit status, stdout, stderr)."""
    from omnigraph.cli.migrate import cli as migrate_cli

    result = CliRunner().invoke(
        migrate_cli,
        [str(a) for a in args],
        env={"OMNIGRAPH_FAILPOINTS": None},
        catch_exceptions=False,
        prog_name="omnigraph-migrate",
    )
    return result.exit_code, result.stdout, result.stderr


def assert_typed_failure(status: int, stdout: str, stderr: str) -> dict[str, Any]:
    """Exit 1 or 4, one JSON error document with a code other than ``internal``, no traceback."""
    assert status in TYPED_EXITS, (status, stdout[-2000:], stderr[-2000:])
    error = json.loads(stdout)["error"]
    assert error["code"] != "internal", error
    assert "Traceback" not in stderr and "Traceback" not in stdout
    return error


def mutate(document: bytes, data: st.DataObject) -> bytes:
    """A few random byte-level edits of ``document``: replace, insert, delete or duplicate spans."""
    result = bytearray(document)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(result)), label="at")
        kind = data.draw(st.sampled_from(["replace", "insert", "delete", "duplicate"]), label="kind")
        chunk = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        if kind == "replace":
            result[at : at + len(chunk)] = chunk
        elif kind == "insert":
            result[at:at] = chunk
        elif kind == "delete":
            del result[at : at + len(chunk)]
        else:
            result[at:at] = result[max(0, at - 16) : at]
    return bytes(result)


def draw_document(kind: str, valid: bytes, data: st.DataObject) -> bytes:
    if kind == "bytes":
        return data.draw(st.binary(max_size=400), label="bytes")
    if kind == "text":
        return data.draw(st.text(max_size=200), label="text").encode("utf-8", "surrogatepass")
    return mutate(valid, data)


# -- the .pg parser ---------------------------------------------------------------------------


@SETTINGS
@given(kind=st.sampled_from(["bytes", "text", "mutation"]), data=st.data())
def test_schema_files(tmp_path: Path, kind: str, data: st.DataObject) -> None:
    source = draw_document(kind, (PROJECT / "examples" / "social.pg").read_bytes(), data)
    _init_with(tmp_path, source)


@pytest.mark.parametrize("blob", HOSTILE_BLOBS[:-1], ids=lambda b: f"{len(b)}b")
def test_schema_files_hostile_shapes(tmp_path: Path, blob: bytes) -> None:
    assert _init_with(tmp_path, blob) != 0


def _init_with(tmp_path: Path, source: bytes) -> int:
    schema = tmp_path / "schema.pg"
    schema.write_bytes(source)
    root = tmp_path / "root"
    shutil.rmtree(root, ignore_errors=True)
    result = invoke(OMNIGRAPH, "init", "--schema", schema, "--json", root)
    if result.returncode != 0:
        assert_typed_failure(result.returncode, result.stdout, result.stderr)
        assert not root.exists()
    return result.returncode


# -- the JSONL loader -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_graph(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("hostile") / "graph")
    make_example_graph(uri)
    return uri


def _load_with(engine_graph: str, tmp_path: Path, data: bytes, mode: str = "append") -> int:
    path = tmp_path / "data.jsonl"
    path.write_bytes(data)
    before = tree_digest(engine_graph)
    result = invoke(OMNIGRAPH, "load", "--mode", mode, "--data", path, "--json", engine_graph)
    if result.returncode == 0:
        assert_check_clean(engine_graph)  # valid after all: it loaded, and the graph is sound
    else:
        assert_typed_failure(result.returncode, result.stdout, result.stderr)
        assert tree_digest(engine_graph) == before
    return result.returncode


@SETTINGS
@given(kind=st.sampled_from(["bytes", "text", "mutation"]), mode=st.sampled_from(["append", "merge", "overwrite"]), data=st.data())
def test_jsonl_files(engine_graph: str, tmp_path: Path, kind: str, mode: str, data: st.DataObject) -> None:
    _load_with(engine_graph, tmp_path, draw_document(kind, (PROJECT / "examples" / "social.jsonl").read_bytes(), data), mode)


@pytest.mark.parametrize("blob", HOSTILE_BLOBS[:-1], ids=lambda b: f"{len(b)}b")
def test_jsonl_hostile_shapes(engine_graph: str, tmp_path: Path, blob: bytes) -> None:
    assert _load_with(engine_graph, tmp_path, blob) != 0


@pytest.mark.parametrize(
    "name", ["a/b", "../../etc/passwd", "..", "line\nbreak", "tab\there", "\U0001f600 emoji", "nul\x00byte", "quote'\""]
)
def test_ids_with_slashes_dots_newlines_and_4_byte_utf8_round_trip(tmp_path: Path, name: str) -> None:
    uri = str(tmp_path / "graph")
    make_example_graph(uri)
    record = {"type": "Person", "data": {"name": name}}
    tag = {"type": "Tag", "data": {"id": name, "label": name}}
    assert _load_with(uri, tmp_path, (json.dumps(record) + "\n" + json.dumps(tag) + "\n").encode()) == 0
    exported = [json.loads(line) for line in export_text(uri).splitlines()]
    assert {"type": "Person", "data": {"id": name, "name": name}} in exported
    assert {"type": "Tag", "data": {"id": name, "label": name}} in exported
    refused = invoke(OMNIGRAPH, "branch", "create", name, "--json", uri)  # not a valid branch name
    assert assert_typed_failure(refused.returncode, refused.stdout, refused.stderr)["code"] == "bad_request"


# -- storage that is not a graph --------------------------------------------------------------


def test_a_graph_path_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "graph"
    path.write_bytes(b"not a graph")
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"")
    for args in (
        ["check"],
        ["snapshot"],
        ["load", "--mode", "append", "--data", str(data)],
        ["init", "--schema", str(PROJECT / "examples" / "social.pg")],
    ):
        result = invoke(OMNIGRAPH, *args, "--json", path)
        assert assert_typed_failure(result.returncode, result.stdout, result.stderr)["code"] == "bad_request"
    status, stdout, stderr = run_migrate("status", path, "--json")
    assert assert_typed_failure(status, stdout, stderr)["code"] == "bad_request"
    assert path.read_bytes() == b"not a graph"


@pytest.fixture(scope="module")
def authenticating_s3() -> Any:
    """A moto server that checks credentials after its first request (which creates a bucket)."""
    port = _free_loopback_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "1"}
    process = subprocess.Popen(s3_server_command(port), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port)
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="any", aws_secret_access_key="any"
        ).create_bucket(Bucket="og-guarded")
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


def _assert_s3_commands_refused(uri: str) -> None:
    for args in (
        ["check"],
        ["snapshot"],
        ["load", "--mode", "append", "--data", str(PROJECT / "examples" / "social.jsonl")],
        ["init", "--schema", str(PROJECT / "examples" / "social.pg")],
    ):
        result = invoke(OMNIGRAPH, *args, "--json", uri)
        assert_typed_failure(result.returncode, result.stdout, result.stderr)
    status, stdout, stderr = run_migrate("status", uri, "--json")
    assert_typed_failure(status, stdout, stderr)


def test_a_bucket_that_does_not_exist(s3_server: str) -> None:
    _assert_s3_commands_refused("s3://og-no-such-bucket-here/graph")


def test_wrong_s3_credentials(authenticating_s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", authenticating_s3)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    _assert_s3_commands_refused("s3://og-guarded/graph")


# -- the playbook loader ----------------------------------------------------------------------


@SETTINGS
@given(kind=st.sampled_from(["bytes", "text", "mutation"]), data=st.data())
def test_playbook_files(engine_graph: str, tmp_path: Path, kind: str, data: st.DataObject) -> None:
    document = draw_document(kind, (PROJECT / "playbooks" / "upgrade.yaml").read_bytes(), data)
    assume(not _is_valid(Playbook, document))  # a valid mutation would run real steps
    _playbook_with(engine_graph, tmp_path, document)


@pytest.mark.parametrize("blob", HOSTILE_BLOBS, ids=lambda b: f"{len(b)}b")
def test_playbook_hostile_shapes(engine_graph: str, tmp_path: Path, blob: bytes) -> None:
    _playbook_with(engine_graph, tmp_path, blob)


def _is_valid(model: Any, document: bytes) -> bool:
    try:
        model.model_validate(yaml.safe_load(document.decode("utf-8")))
    except Exception:
        return False
    return True


def _playbook_with(engine_graph: str, tmp_path: Path, document: bytes) -> None:
    path = tmp_path / "playbook.yaml"
    path.write_bytes(document)
    before = tree_digest(engine_graph)
    status, stdout, stderr = run_migrate("playbook", "run", path, engine_graph, "--yes", "--json")
    assert_typed_failure(status, stdout, stderr)
    assert tree_digest(engine_graph) == before


# -- the decisions file -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, bytes]:
    """A migration stopped by a duplicate: (graph, token, a valid decisions template)."""
    directory = tmp_path_factory.mktemp("stopped")
    uri = str(directory / "graph")
    build_fixture(uri, compact=True)
    append_unfenced(uri, "node:Person", [{"id": "Alice", "name": "Alice"}])
    assert run_migrate("run", uri, "--owner", "ci")[0] == 4
    token = claim_token(uri)
    template = directory / "template.yaml"
    assert run_migrate("repair", uri, "--token", token, "--decisions", template, "--template")[0] == 0
    return uri, token, template.read_bytes()


@SETTINGS
@given(kind=st.sampled_from(["bytes", "text", "mutation"]), data=st.data())
def test_decisions_files(stopped: tuple[str, str, bytes], tmp_path: Path, kind: str, data: st.DataObject) -> None:
    uri, token, template = stopped
    document = draw_document(kind, template, data)
    assume(not _is_valid(DecisionsFile, document))  # a valid one may apply a repair
    _repair_with(uri, token, tmp_path, document)


@pytest.mark.parametrize("blob", HOSTILE_BLOBS, ids=lambda b: f"{len(b)}b")
def test_decisions_hostile_shapes(stopped: tuple[str, str, bytes], tmp_path: Path, blob: bytes) -> None:
    uri, token, _ = stopped
    _repair_with(uri, token, tmp_path, blob)


def test_the_unfilled_template_is_refused(stopped: tuple[str, str, bytes], tmp_path: Path) -> None:
    uri, token, template = stopped
    _repair_with(uri, token, tmp_path, template)


def _repair_with(uri: str, token: str, tmp_path: Path, document: bytes) -> None:
    path = tmp_path / "decisions.yaml"
    path.write_bytes(document)
    before = tree_digest(uri)
    status, stdout, stderr = run_migrate("repair", uri, "--token", token, "--decisions", path, "--json")
    assert_typed_failure(status, stdout, stderr)
    assert tree_digest(uri) == before


# -- the ledger reader ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """A migration killed after its first PK install: (graph, token, one ledger record's path)."""
    uri = str(tmp_path_factory.mktemp("crashed") / "graph")
    build_fixture(uri, compact=True)
    env = {**os.environ, FAILPOINT_ENV: "unit.after_pk"}
    done = subprocess.run([str(BIN / "omnigraph-migrate"), "run", uri, "--owner", "ci"], env=env, capture_output=True, timeout=300)
    assert done.returncode == FAILPOINT_EXIT_STATUS, done.stderr
    status = json.loads(run_migrate("status", uri, "--json")[1])
    records = sorted((Path(uri) / ledger_dir(status["migration_id"])).glob("*.json"))
    return uri, claim_token(uri), records[len(records) // 2]


@SETTINGS
@given(kind=st.sampled_from(["bytes", "text", "mutation"]), data=st.data())
def test_ledger_records(crashed: tuple[str, str, Path], kind: str, data: st.DataObject) -> None:
    uri, token, record = crashed
    original = record.read_bytes()
    document = draw_document(kind, original, data)
    assume(document != original)
    _ledger_with(uri, token, record, original, document)


@pytest.mark.parametrize("blob", HOSTILE_BLOBS, ids=lambda b: f"{len(b)}b")
def test_ledger_hostile_shapes(crashed: tuple[str, str, Path], blob: bytes) -> None:
    uri, token, record = crashed
    _ledger_with(uri, token, record, record.read_bytes(), blob)


def _ledger_with(uri: str, token: str, record: Path, original: bytes, document: bytes) -> None:
    record.write_bytes(document)
    try:
        before = tree_digest(uri)
        status, stdout, stderr = run_migrate("status", uri, "--json")
        if status == 0:
            return  # the reader accepts the edit (whitespace, an equivalent document): nothing to refuse
        for code, out, err in ((status, stdout, stderr), run_migrate("resume", uri, "--token", token, "--json")):
            error = assert_typed_failure(code, out, err)
            assert error["code"] in ("ledger_corrupt", "bad_request", "precondition_failed"), error
            assert tree_digest(uri) == before
    finally:
        record.write_bytes(original)
