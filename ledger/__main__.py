"""``python -m omnigraph.ledger schema``: print the JSON Schema of ledger records on stdout."""

from __future__ import annotations

import argparse
import sys

from omnigraph.ledger.schema import schema_text


def main(argv: list[str] | None = None) -> int:
    """Run the ledger tool; ``schema`` prints the record union's JSON Schema."""
    parser = argparse.ArgumentParser(prog="python -m omnigraph.ledger", description="Migration ledger tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("schema", help="Print the JSON Schema of the ledger record union (ledger/record-schema.json).")
    parser.parse_args(argv)
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
