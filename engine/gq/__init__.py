"""The ``.gq`` language: tokens, syntax tree, parser and type checkers, for mutations and reads.

:func:`~omnigraph.engine.gq.parser.parse` returns the queries of a source;
:func:`~omnigraph.engine.gq.parser.choose_query` picks one of the kind a command runs.
:func:`omnigraph.engine.gq.checker.check_query` checks a mutation and
:func:`omnigraph.engine.gq.read_checker.check_read` a read query against a catalog, binding the
parameters. Every refusal is a :class:`~omnigraph.engine.gq.syntax.GqError` (``bad_request``)
naming line, column and the offending token.

The modules: :mod:`~omnigraph.engine.gq.syntax` (the syntax tree and the error),
:mod:`~omnigraph.engine.gq.parser` (the ``.gq`` dialect of the shared scanner, the token cursor,
the mutation and read grammars, the choice of one query), :mod:`~omnigraph.engine.gq.checker`
(mutations and parameter binding) and :mod:`~omnigraph.engine.gq.read_checker` (read queries:
operand types, checking and the bound read). This package exports no names: callers import each
name from the module that defines it.
"""
