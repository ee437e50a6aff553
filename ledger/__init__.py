"""The migration ledger: append-only, sequence-numbered, create-if-absent records.

Layout: ``__migration/<migration-id>/ledger/<seq:08d>.json`` under the graph root (the caller
passes the directory). The package itself names nothing; its modules do:

- :mod:`omnigraph.ledger.ledger`: the :class:`~omnigraph.ledger.ledger.Ledger` and its write/read contracts;
- :mod:`omnigraph.ledger.records`: every record kind, one pydantic discriminated union;
- :mod:`omnigraph.ledger.fold`: the folded state of a replayed ledger;
- :mod:`omnigraph.ledger.layout`: the file names of records;
- :mod:`omnigraph.ledger.render`: a replay as a table for people and a JSON document for programs;
- :mod:`omnigraph.ledger.schema`: the JSON Schema of records and its committed copy;
- :mod:`omnigraph.ledger.errors`: a lost sequence-number race and a ledger that cannot be read back.
"""
