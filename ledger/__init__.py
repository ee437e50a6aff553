"""The migration ledger: append-only, sequence-numbered, create-if-absent records.

Layout: ``__migration/<migration-id>/ledger/<seq:08d>.json`` under the graph root (the caller
passes the directory). See :mod:`omnigraph.ledger.ledger` for the write/read contracts,
:mod:`omnigraph.ledger.records` for the record kinds and :mod:`omnigraph.ledger.fold` for the folded state.
"""
