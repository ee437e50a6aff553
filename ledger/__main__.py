"""``python -m ledger schema``: print the JSON Schema of ledger records on stdout."""

from __future__ import annotations

import click

from ledger.schema import schema_text


@click.group()
def main() -> None:
    """Migration ledger tools."""


@main.command()
def schema() -> None:
    """Print the JSON Schema of the ledger record union (the content of ledger/record-schema.json)."""
    click.echo(schema_text(), nl=False)


if __name__ == "__main__":
    main()
