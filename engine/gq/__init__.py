"""The ``.gq`` mutation language: tokens, syntax tree, parser and type checker.

``parse(source)`` returns the queries of a source; :func:`engine.gq.checker.check_query` checks
one against a catalog and binds its parameters. Every refusal is a :class:`GqError`
(``bad_request``) naming line, column and the offending token.
"""

from engine.gq.errors import GqError
from engine.gq.parser import parse
from engine.gq.syntax import Query

__all__ = ["GqError", "Query", "parse"]
