"""The measured processes of ``write_bench.py``: one operation per process, one JSON line out.

``python bench/write_ops.py OP ...``:

* ``build --rows N --out DIR [--btree]``: a format-5 graph in ``DIR/graph`` with one keyed node
  type ``Item`` (``name: String @key, n: I64``) holding N rows, written by one engine commit
  (``TableWrite(..., "overwrite")``); with ``--btree`` a BTREE index on ``id`` is then added by
  hand with Lance (``create_scalar_index``) and the ``__manifest`` pin is moved to that index
  commit, as an operator would after adding an index outside the engine. ``DIR/fixture.json``
  names the table and its pinned version;
* ``upsert GRAPH`` / ``insert GRAPH``: ``omnigraph.engine.ops.load.load`` of a 32-row JSONL document with
  ``mode="merge"`` (fenced upsert of 32 existing ids) / ``mode="append"`` (fenced strict insert of
  32 new ids), the whole engine path (snapshot, id probes, intent, Lance merge, publish);
* ``scan GRAPH``: Lance alone streams the ``id`` column of the pinned table version (the floor);
* ``load-data --rows N --out DIR``: writes ``DIR/rows.jsonl`` and ``DIR/rows.arrow`` (the same N
  rows as JSONL for ``omnigraph load`` and as an Arrow IPC file for Lance);
* ``lance-write ARROW OUT``: ``lance.write_dataset`` of the Arrow file (the load floor);
* ``json-lance JSONL OUT``: ``pyarrow.json.read_json`` of the JSONL file (every thread, the record
  schema given), then ``lance.write_dataset`` of its ``data`` columns: the least a JSONL load does,
  with no validation, no ids and no commit protocol.

Each prints ``{"op_s": ...}``: the seconds of the operation itself, after imports and opening.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import lance
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from omnigraph.engine.storage.store import open_store

SCHEMA = "node Item {\n    name: String @key\n    n: I64\n}\n"
TABLE_KEY = "node:Item"
ACTOR = "bench"
FIXTURE = "fixture.json"
GRAPH = "graph"
BATCH = 32


def item_ids(first: int, count: int) -> pa.Array:
    numbers = pc.cast(pa.array(np.arange(first, first + count, dtype=np.int64)), pa.utf8())
    return pc.binary_join_element_wise(pa.scalar("item"), pc.utf8_lpad(numbers, width=9, padding="0"), "-")


def build(rows: int, out: Path, btree: bool) -> dict:
    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import init_graph
    from omnigraph.engine.manifest.rows import MAIN, BranchSnapshot
    from omnigraph.engine.ops.write import CommitPlan, TableWrite, commit

    graph = init_graph(open_store(str(out / GRAPH)), SCHEMA, FENCED_PROFILE, actor=ACTOR)
    schema = graph.catalog.table(TABLE_KEY).arrow_schema(with_pk=True)
    ids = item_ids(0, rows)
    values = {"id": ids, "name": ids, "n": pa.array(np.arange(rows, dtype=np.int64))}
    table = pa.Table.from_arrays([values[f.name].cast(f.type) for f in schema], schema=schema)

    def prepare(snapshot: BranchSnapshot, _previous: CommitPlan[None] | None) -> CommitPlan[None]:
        return CommitPlan((TableWrite(TABLE_KEY, "overwrite", table),), (snapshot.head.commit_id,), f"bench: {rows} rows", None)

    commit(graph, MAIN, prepare, actor=ACTOR)
    snapshot = graph.manifest.snapshot(MAIN)
    entry = snapshot.table(TABLE_KEY)
    if btree:
        dataset = lance.dataset(str(out / GRAPH / entry.table_path))
        dataset.create_scalar_index("id", "BTREE")
        entry = msgspec.structs.replace(entry, table_version=int(lance.dataset(str(out / GRAPH / entry.table_path)).version))
        graph.manifest.publish(snapshot, [entry], head=None)
    document = {"rows": rows, "btree": btree, "table_path": entry.table_path, "table_version": entry.table_version}
    (out / FIXTURE).write_text(json.dumps(document) + "\n", encoding="utf-8")
    return document


def _jsonl(first: int, count: int, n: int) -> bytes:
    names = item_ids(first, count).to_pylist()
    return "".join(json.dumps({"type": "Item", "data": {"name": name, "n": n}}) + "\n" for name in names).encode()


def engine_write(graph_dir: Path, mode: str) -> dict:
    from omnigraph.engine.door.table_store import FENCED_PROFILE
    from omnigraph.engine.graph import open_graph
    from omnigraph.engine.manifest.rows import MAIN
    from omnigraph.engine.ops.load import load

    graph = open_graph(open_store(str(graph_dir)), FENCED_PROFILE, write=True)
    rows = graph.manifest.snapshot(MAIN).table(TABLE_KEY).row_count
    # merge: 32 existing ids spread over the table; append: 32 ids past the end.
    data = _jsonl(rows // 2, BATCH, -1) if mode == "merge" else _jsonl(rows, BATCH, -1)
    started = time.perf_counter()
    result = load(graph, data, mode=mode, branch=MAIN, actor=ACTOR)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    after = graph.manifest.snapshot(MAIN).table(TABLE_KEY).row_count
    expected = rows if mode == "merge" else rows + BATCH
    if after != expected or len(result.commits) != 1:
        raise SystemExit(f"{mode}: expected {expected} rows after one commit, found {after}")
    return {"op_s": round(elapsed, 4), "rows_after": after}


def scan(graph_dir: Path) -> dict:
    document = json.loads((graph_dir.parent / FIXTURE).read_text(encoding="utf-8"))
    started = time.perf_counter()
    dataset = lance.dataset(str(graph_dir / document["table_path"]), version=document["table_version"])
    rows = sum(len(batch) for batch in dataset.to_batches(columns=["id"]))
    return {"op_s": round(time.perf_counter() - started, 4), "rows": rows}


def load_data(rows: int, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    ids = item_ids(0, rows)
    table = pa.table({"id": ids, "name": ids, "n": pa.array(np.arange(rows, dtype=np.int64))})
    with pa.OSFile(str(out / "rows.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    with open(out / "rows.jsonl", "w", encoding="utf-8") as sink:
        for start in range(0, rows, 100_000):
            for name, n in zip(ids[start : start + 100_000].to_pylist(), range(start, min(rows, start + 100_000)), strict=True):
                sink.write(json.dumps({"type": "Item", "data": {"name": name, "n": n}}) + "\n")
    return {"rows": rows}


def lance_write(arrow: Path, out: Path) -> dict:
    started = time.perf_counter()
    with pa.memory_map(str(arrow)) as source:
        table = pa.ipc.open_file(source).read_all()
    written = lance.write_dataset(table, str(out), mode="create")
    return {"op_s": round(time.perf_counter() - started, 4), "rows": written.count_rows()}


def json_lance(jsonl: Path, out: Path) -> dict:
    import pyarrow.json as pj

    started = time.perf_counter()
    record = pa.schema([("type", pa.utf8()), ("data", pa.struct([("name", pa.utf8()), ("n", pa.int64())]))])
    table = pj.read_json(str(jsonl), parse_options=pj.ParseOptions(explicit_schema=record))
    data = pa.Table.from_struct_array(table.column("data").combine_chunks())
    written = lance.write_dataset(data, str(out), mode="create")
    return {"op_s": round(time.perf_counter() - started, 4), "rows": written.count_rows()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="op", required=True)
    b = sub.add_parser("build")
    b.add_argument("--rows", type=int, required=True)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--btree", action="store_true")
    for name in ("upsert", "insert", "scan"):
        sub.add_parser(name).add_argument("graph", type=Path)
    d = sub.add_parser("load-data")
    d.add_argument("--rows", type=int, required=True)
    d.add_argument("--out", type=Path, required=True)
    w = sub.add_parser("lance-write")
    w.add_argument("arrow", type=Path)
    w.add_argument("out", type=Path)
    j = sub.add_parser("json-lance")
    j.add_argument("jsonl", type=Path)
    j.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.op == "build":
        result = build(args.rows, args.out, args.btree)
    elif args.op in ("upsert", "insert"):
        result = engine_write(args.graph, "merge" if args.op == "upsert" else "append")
    elif args.op == "scan":
        result = scan(args.graph)
    elif args.op == "load-data":
        result = load_data(args.rows, args.out)
    elif args.op == "json-lance":
        result = json_lance(args.jsonl, args.out)
    else:
        result = lance_write(args.arrow, args.out)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
