"""The ``.gq`` language: tokens, syntax tree, parser and type checkers, for mutations and reads.

``parse(source)`` returns the queries of a source; :func:`choose_query` picks one of the kind a
command runs. :func:`omnigraph.engine.gq.checker.check_query` checks a mutation and
:func:`omnigraph.engine.gq.read_checker.check_read` a read query against a catalog, binding the
parameters. Every refusal is a :class:`GqError` (``bad_request``) naming line, column and the
offending token.
"""
