"""Search functions of a read query, checked: ``nearest($v.prop, $q)`` and the full-text functions.

``nearest`` is the L2 (Euclidean) distance of a ``Vector(N)`` property from a query vector of the
same dimension (a ``Vector(N)`` parameter or a list literal of ``N`` numbers); a row whose vector
is null has no distance (NULL). It is a return item (the distance, ``F64``) and an ``order`` key
(nearest first, no ``asc``/``desc``). An ordering by it needs a ``limit`` (it asks for the nearest
rows, not a sort of every row), and it is refused in a grouped query. :func:`check_nearest`
refuses, as a :class:`~omnigraph.engine.gq.syntax.GqError` at the offending token: a property
that is not a vector, a query that is not a vector of the property's dimension (a ``String``
parameter included: no embedding provider turns text into a vector here), a list literal that is
not ``N`` finite numbers. A query vector is float32, as the property's values are. How the
distance is computed and which index serves it is the query engine's
(:mod:`omnigraph.engine.query.search`).

The full-text functions take a ``String`` property and a ``String`` query (a literal or a
parameter), compared as :func:`tokens` (runs of letters and digits, lower-cased):
``search($v.prop, $q)`` (every query token is a token of the text), ``match_text($v.prop, $q)``
(some query token is), ``fuzzy($v.prop, $q [, max_edits])`` (every query token is within
``max_edits`` edits, Levenshtein, of a token of the text; :func:`default_max_edits` without it)
are match clauses; a query without a token, a null text and a null query never match.
``bm25($v.prop, $q)`` is the BM25 relevance of the text for the query's distinct tokens, a
return item and an ``order`` key (highest first). They are :class:`TextMatch` and
:class:`Bm25Score` once checked (:func:`check_text_search`).

``rrf(rank, rank [, k])`` fuses a ``nearest`` and/or ``bm25`` ranking (:class:`RrfScore`): a return
item and an ``order`` key, highest first.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from omnigraph.engine.gq.syntax import GqError, LiteralValue, Nearest, Param, ParamRef, TextSearch
from omnigraph.engine.lexer import Token
from omnigraph.engine.schema.types import INTEGER_RANGES, PropertyType, ScalarType, VectorType
from omnigraph.engine.schema.values import InvalidValue, coerce_value


class NearestScore(msgspec.Struct, frozen=True):
    """A checked ``nearest``: variable ``var``'s vector ``column`` against ``vector`` (None: a null parameter, no distance)."""

    var: int
    column: str
    dim: int
    vector: tuple[float, ...] | None


def check_nearest(call: Nearest, var: int, ptype: PropertyType, declared: dict[str, Param], params: dict[str, Any]) -> NearestScore:
    """The checked ``call`` on variable ``var``'s property of type ``ptype`` (module docstring)."""
    prop = call.prop
    if not isinstance(ptype, VectorType):
        raise _error(f"nearest takes a Vector property; ${prop.var}.{prop.prop} is {ptype}", prop.prop_token)
    query = call.query
    if isinstance(query, ParamRef):
        param = declared.get(query.name)
        if param is None:
            raise _error(f"undeclared parameter ${query.name}", query.token)
        if param.type != ptype:
            raise _error(
                f"nearest(${prop.var}.{prop.prop}, ...) takes a {ptype} query; ${query.name} is {param.type} "
                "(text is not turned into a vector here: pass the vector)",
                query.token,
            )
        value = params[query.name]
        return NearestScore(var, prop.prop, ptype.dim, None if value is None else tuple(float(x) for x in value))
    return NearestScore(var, prop.prop, ptype.dim, _literal_vector(query, ptype))


def _literal_vector(literal: LiteralValue, ptype: VectorType) -> tuple[float, ...]:
    """The list literal as a ``Vector(N)`` value (float32 numbers, as a parameter would be)."""
    try:
        return tuple(coerce_value(ptype, literal.value))
    except InvalidValue as error:
        raise _error(f"nearest's query vector: {error}", literal.token) from None


def _error(message: str, token: Token) -> GqError:
    return GqError(message, token.line, token.column, token.text)


TEXT_PREDICATES = ("search", "fuzzy", "match_text")
"""The full-text functions that are match clauses (true or false per row)."""
TOKEN = re.compile(r"[^\W_]+")
"""A token: a maximal run of letters and digits (Unicode), compared lower-cased."""


def tokens(text: str) -> list[str]:
    """The tokens of ``text``, lower-cased, in order (module docstring of :mod:`omnigraph.engine.query.search`).

    Lower-cased one character at a time, by the character's own lowercase (Unicode's simple case
    mapping, as DuckDB's ``lower`` maps the stored texts): capital I with a dot (U+0130) is
    ``i`` and capital sigma is always the medial small sigma (U+03C3), where ``str.lower`` gives
    ``i`` with a combining dot (which splits the token) and, at the end of a word, the final
    sigma (U+03C2): a text would not match a search for itself.
    """
    return TOKEN.findall("".join(character.lower()[:1] for character in text))


def default_max_edits(token: str) -> int:
    """The edits ``fuzzy`` allows a query token by default: none up to 2 characters, 1 up to 5, else 2."""
    return 0 if len(token) <= 2 else 1 if len(token) <= 5 else 2


class TextMatch(msgspec.Struct, frozen=True):
    """A checked ``search``/``fuzzy``/``match_text`` clause on variable ``var``'s String ``column``.

    ``query`` None: a null parameter (no row matches); ``max_edits`` is ``fuzzy``'s (None: the default per token).
    """

    func: str
    var: int
    column: str
    query: str | None
    max_edits: int | None = None


class Bm25Score(msgspec.Struct, frozen=True):
    """A checked ``bm25($v.prop, $q)``: the BM25 relevance of variable ``var``'s String ``column`` for ``query``."""

    var: int
    column: str
    query: str | None


def check_text_search(
    call: TextSearch, var: int, ptype: PropertyType, declared: dict[str, Param], params: dict[str, Any]
) -> TextMatch | Bm25Score:
    """The checked full-text ``call`` on variable ``var``'s property of type ``ptype``.

    Refused: a property that is not a ``String`` (an enum included: its values are not text), a query
    that is not a ``String`` literal or parameter, a ``max_edits`` that is not an integer literal or
    parameter of 0 or more.
    """
    prop = call.prop
    if not (isinstance(ptype, ScalarType) and ptype.name == "String"):
        raise _error(f"{call.func} takes a String property; ${prop.var}.{prop.prop} is {ptype}", prop.prop_token)
    query = _string_argument(call, call.query, declared, params)
    if call.func == "bm25":
        return Bm25Score(var, prop.prop, query)
    max_edits = None
    if call.max_edits is not None:
        max_edits = _count("fuzzy's max_edits", call.max_edits, 0, declared, params)
    return TextMatch(call.func, var, prop.prop, query, max_edits)


def _string_argument(call: TextSearch, query: LiteralValue | ParamRef, declared: dict[str, Param], params: dict[str, Any]) -> str | None:
    if isinstance(query, ParamRef):
        param = declared.get(query.name)
        if param is None:
            raise _error(f"undeclared parameter ${query.name}", query.token)
        if param.type != ScalarType("String"):
            raise _error(f"{call.func} takes a String query; ${query.name} is {param.type}", query.token)
        value = params[query.name]
        return None if value is None else str(value)
    if not isinstance(query.value, str) or query.typed is not None:
        raise _error(f"{call.func} takes a String query (a string literal or a String parameter)", query.token)
    return query.value


def _count(what: str, argument: LiteralValue | ParamRef, minimum: int, declared: dict[str, Param], params: dict[str, Any]) -> int | None:
    """The integer argument ``what`` (``fuzzy's max_edits``, ``rrf's k``) of ``minimum`` or more.

    A literal or a non-nullable integer parameter; None for a parameter without a value
    (checking types only, ``omnigraph lint``).
    """
    value: Any = argument.value if isinstance(argument, LiteralValue) else None
    if isinstance(argument, ParamRef):
        param = declared.get(argument.name)
        if param is None:
            raise _error(f"undeclared parameter ${argument.name}", argument.token)
        if not (isinstance(param.type, ScalarType) and param.type.name in INTEGER_RANGES) or param.nullable:
            raise _error(f"{what} is an integer; ${argument.name} is {param.type}{'?' if param.nullable else ''}", argument.token)
        value = params[argument.name]
        if value is None:
            return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _error(f"{what} is an integer of {minimum} or more", argument.token)
    return value


RRF_K = 60
"""``rrf``'s ``k`` when the query gives none."""


class RrfScore(msgspec.Struct, frozen=True):
    """A checked ``rrf(first, second, k)``: ``1 / (k + rank)`` summed over the two rankings a row is ranked in.

    A ``nearest`` ranking ranks the entities of its variable with a vector, nearest first; a ``bm25``
    ranking those whose score is above 0, highest first; ties by id; ranks start at 1.
    """

    first: NearestScore | Bm25Score
    second: NearestScore | Bm25Score
    k: int


def check_rrf_k(argument: LiteralValue | ParamRef | None, declared: dict[str, Param], params: dict[str, Any]) -> int:
    """``rrf``'s ``k``: :data:`RRF_K` when absent; else an integer literal or parameter of 1 or more."""
    found = None if argument is None else _count("rrf's k", argument, 1, declared, params)
    return RRF_K if found is None else found
