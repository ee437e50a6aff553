"""A format-4 graph with a Blob table (written by ``omnigraph-v4``: managed bytes of every
storage kind and an external reference, on main and on a branch) migrates to format 5 like any
other: the PK install touches no payload. Proved by the physical fingerprint of every image and by
the bytes of every data and blob file of the table, equal before and after the run; then every
cell reads the same bytes through the format-5 engine, which writes to the table again."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import lance

import omnigraph
from omnigraph.engine.storage.store import open_store
from omnigraph.migrator.layout import physical_fingerprint
from tests.support.check_helpers import assert_check_clean
from tests.support.migration_cli import migrate

SCHEMA = "node Doc { slug: String @key  body: Blob?  n: I32? }\n"


def _images(root: str) -> dict[str, str]:
    """The physical fingerprint of the Doc image every branch pins."""
    store, prints = open_store(root), {}
    with omnigraph.open(root, read_only=True) as graph:
        for branch in graph.branches():
            table = next(t for t in graph.snapshot(branch.name).tables if t.table_key == "node:Doc")
            dataset = lance.dataset(store.dataset_uri(table.path), storage_options=store.storage_options)
            prints[branch.name] = physical_fingerprint(dataset.checkout_version((table.table_branch, table.version)))
    return prints


def _payload_files(root: str) -> dict[str, str]:
    """Every data and blob file under the table directories, with the digest of its bytes."""
    store = open_store(root)
    return {path: hashlib.sha256(store.fs.cat_file(path)).hexdigest() for path in store.fs.find(store.path("nodes")) if "/data/" in path}


def _cells(root: str, slugs: list[str]) -> dict[tuple[str, str], bytes]:
    with omnigraph.open(root, read_only=True) as graph:
        return {(branch, slug): graph.blob("Doc", slug, "body", branch=branch) for branch in ("main", "dev") for slug in slugs}


def test_a_blob_table_migrates_without_touching_its_payloads(root_uri: str, tmp_path: Path) -> None:
    external = tmp_path / "external.bin"
    external.write_bytes(os.urandom(4096))
    payloads = {"inline": b"tiny", "packed": os.urandom(200_000), "dedicated": os.urandom(5 << 20)}
    records = [{"type": "Doc", "data": {"slug": slug, "body": data}} for slug, data in payloads.items()]
    with omnigraph.init(root_uri, SCHEMA, program=omnigraph.FORMAT_4_WRITER) as four:
        four.load([*records, {"type": "Doc", "data": {"slug": "ref", "body": external.as_uri()}}], mode="overwrite")
        four.create_branch("dev")
        four.load([{"type": "Doc", "data": {"slug": "dev-only", "body": b"on dev"}}], mode="append", branch="dev")
        assert {t.table_key: t.pk for t in four.snapshot().tables} == {"node:Doc": ()}
    slugs = [*payloads, "ref"]
    before = (_images(root_uri), _payload_files(root_uri), _cells(root_uri, slugs))
    assert len(before[1]) >= 3  # a data file per commit, and the dedicated payload's blob file

    upgraded = migrate("run", root_uri, "--owner", "ci", "--json")
    assert upgraded.returncode == 0, upgraded.stderr

    assert (_images(root_uri), _payload_files(root_uri), _cells(root_uri, slugs)) == before
    with omnigraph.open(root_uri) as five:
        assert {t.table_key: t.pk for t in five.snapshot().tables} == {"node:Doc": ("id",)}
        assert five.blob("Doc", "dev-only", "body", branch="dev") == b"on dev"
        five.mutate('query bump() { update Doc set { n: 1 } where slug = "packed" }')
        assert five.blob("Doc", "packed", "body") == payloads["packed"]
    assert_check_clean(root_uri)


def test_a_duplicate_repair_keeps_and_renames_blob_rows_with_their_payloads(tmp_path: Path) -> None:
    """A format-4 Blob table with one id twice: the migration stops (exit 4), a repair keeps one
    row and renames the other, each is inserted again with its own bytes, and the run resumes."""
    import pyarrow as pa
    import yaml

    from omnigraph.engine.door.legacy import LEGACY_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit
    from omnigraph.migrator import repair
    from tests.support.migration_cli import claim_token

    root = str(tmp_path / "graph")
    omnigraph.init(root, "node Att { name: String  data: Blob? }\n", program=omnigraph.FORMAT_4_WRITER).close()
    graph = open_graph(open_store(root), LEGACY_PROFILE, write=True)
    cells = [{"data": payload, "uri": None, "position": None, "size": None} for payload in (b"one", b"two")]
    rows = [{"id": "a-1", "name": "x", "data": cells[0]}, {"id": "a-1", "name": "y", "data": cells[1]}]
    table = pa.Table.from_pylist(rows, schema=graph.catalog.table("node:Att").arrow_schema(with_pk=False))
    writes = (TableWrite("node:Att", "overwrite", table),)
    commit(graph, "main", lambda snapshot, _previous: CommitPlan(writes, (snapshot.head.commit_id,), "dup", None), actor="t")
    assert migrate("run", root, "--owner", "ci").returncode == 4
    token = claim_token(root)
    decisions = tmp_path / "decisions.yaml"
    repair.write_decisions(decisions, repair.template(open_store(root), token))
    document = yaml.safe_load(decisions.read_text())
    [entry] = document["decisions"]
    first, second = sorted(row["row_id"] for row in entry["rows"])
    entry.update(action="rename", keep_row_id=first, new_ids={second: "a-2"})
    decisions.write_text(yaml.safe_dump(document))
    repair.apply(open_store(root), token, repair.read_decisions(decisions), "ci")
    assert migrate("resume", root, "--token", token).returncode == 0
    with omnigraph.open(root, read_only=True) as five:
        assert (five.blob("Att", "a-1", "data"), five.blob("Att", "a-2", "data")) == (b"one", b"two")
    assert_check_clean(root)
