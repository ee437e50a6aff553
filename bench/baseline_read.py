"""The baseline: read the ``id`` column of every pinned image with Lance alone, nothing else.

``python bench/baseline_read.py GRAPH FIXTURE_JSON`` opens each image listed in the fixture
document (the same 12 ``(table path, table branch, version)`` pins the migrator plans) with
``lance.dataset(...).checkout_version(...)``, streams its ``id`` column with
``to_batches(columns=["id"])`` (Lance's default batch size) and counts the rows and id bytes, so
every batch is materialised and then dropped. It prints one JSON document. It imports only Lance
(and pyarrow through it): its wall time and peak RSS are the floor of "read every id once" that
the migrator's numbers are compared with.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import lance


def read_ids(graph: Path, images: list[dict]) -> dict:
    rows = 0
    id_bytes = 0
    per_image = []
    for image in images:
        started = time.perf_counter()
        dataset = lance.dataset(str(graph / image["table_path"])).checkout_version(
            (image["table_branch"] or "main", image["table_version"])
        )
        image_rows = 0
        for batch in dataset.to_batches(columns=["id"]):
            column = batch.column(0)
            image_rows += len(column)
            id_bytes += column.nbytes
        if image_rows != image["rows"]:
            raise SystemExit(
                f"{image['table_path']}@{image['table_branch']}@v{image['table_version']}: "
                f"read {image_rows} ids, the manifest says {image['rows']}"
            )
        rows += image_rows
        per_image.append(round(time.perf_counter() - started, 4))
    return {"images": len(images), "rows": rows, "id_bytes": id_bytes, "seconds_per_image": per_image}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: baseline_read.py GRAPH FIXTURE_JSON", file=sys.stderr)
        return 2
    graph, fixture = Path(argv[0]), Path(argv[1])
    images = json.loads(fixture.read_text(encoding="utf-8"))["images"]
    print(json.dumps(read_ids(graph, images)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
