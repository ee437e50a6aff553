"""The JSON Schema of the ledger record union, and the committed copy of it.

``ledger/record-schema.json`` must equal :func:`schema_text` byte for byte (a test checks it);
regenerate it with ``python -m omnigraph.ledger schema > ledger/record-schema.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnigraph.ledger.records import RECORD_ADAPTER

SCHEMA_FILE = Path(__file__).with_name("record-schema.json")


def record_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that every stored ledger record satisfies."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "omnigraph-fence migration ledger record",
        **RECORD_ADAPTER.json_schema(),
    }


def schema_text() -> str:
    """The deterministic text of :func:`record_json_schema` (sorted keys, indent 2, final newline)."""
    return json.dumps(record_json_schema(), sort_keys=True, indent=2) + "\n"
