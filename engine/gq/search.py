"""Search functions of a read query, checked: ``nearest($v.prop, $q)``.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omnigraph.engine.gq.syntax import GqError, LiteralValue, Nearest, Param, ParamRef
from omnigraph.engine.lexer import Token
from omnigraph.engine.schema.types import PropertyType, VectorType
from omnigraph.engine.schema.values import InvalidValue, coerce_value


@dataclass(frozen=True)
class NearestScore:
    """A checked ``nearest``: variable ``var``'s vector ``column`` against ``vector`` (None: a null parameter, no distance)."""

    var: int
    column: str
    dim: int
    vector: tuple[float, ...] | None

    def text(self, var_name: str) -> str:
        """The call as a query spells it, with the variable's name (the query vector elided)."""
        return f"nearest(${var_name}.{self.column}, ...)"


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
