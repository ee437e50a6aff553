"""Schema evolution: the steps from one accepted schema to the next, and what each does to a table.

:func:`plan_change` compares the accepted catalog with a proposed one and returns a
:class:`SchemaPlan` (its :class:`SchemaStep` list, in a fixed order: by table key, then by
kind, then by property), or refuses the whole change (:class:`SchemaChangeRefused`, every refused
step listed at once). Types and properties are matched by name, or through ``@rename_from("Old")``
on the new declaration; a ``@rename_from`` whose old name is gone while the new name exists is a
rename already applied and means nothing. What a change may do:

* add a node or edge type; drop one (``data_loss``);
* rename a type or a property (the table, its ids, its edges and the ``id`` key stay as they are);
* add an optional property (existing rows read null), or a required one with ``@default(v)``
  (existing rows get ``v``; later writes must give the value like any required property);
* drop a property (``data_loss``); make a required property optional; widen an enum;
* add, change or remove ``@unique``, ``@range``, ``@check``, ``@card`` and ``@index``, and change
  metadata. An added or changed ``@unique``/``@range``/``@check``/``@card`` step has ``validates``:
  existing rows must satisfy it on every branch before anything is written.

Refused: changing a property's type (but for widening an enum), making an optional property
required, adding a required property without ``@default``, changing a type's ``@key``, an edge's
endpoints, a node into an edge, or a ``@rename_from`` that names nothing. The ``id`` column and its
primary key belong to no declaration (``id`` is not a property name), so no step reaches them; a
``@rename_from("id")`` is refused by name.

:class:`TableChange` is what a plan does to one existing table's columns (drops, renames,
relaxed nullability, added columns with their fill value). :class:`SchemaChain` composes the
plans between two schema versions so rows of an image written under the older one read as the
newer one would hold them (the merge base of a branch merge across a schema change).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from omnigraph.engine.errors import BadRequest
from omnigraph.engine.schema.catalog import Catalog
from omnigraph.engine.schema.tables import CheckRule, Metadata, Property, RangeRule, TableDef
from omnigraph.engine.schema.types import EnumType, ScalarType
from omnigraph.engine.schema.values import InvalidValue, coerce_property

StepKind = Literal[
    "add_type",
    "drop_type",
    "rename_type",
    "add_property",
    "drop_property",
    "rename_property",
    "relax_property",
    "widen_enum",
    "add_constraint",
    "drop_constraint",
    "change_index",
    "change_metadata",
]
_KIND_ORDER = {kind: index for index, kind in enumerate(StepKind.__args__)}  # type: ignore[attr-defined]


class SchemaStep(BaseModel):
    """One step of a schema change.

    ``table_key`` names the type in the new schema (in the old one for ``drop_type``);
    ``from_table_key``/``from_property`` the old names of a rename. ``default`` is the JSON value
    an added required property fills existing rows with. ``constraint`` names what a constraint
    step adds or removes: ``unique`` (``members``), ``range``/``check`` (``members`` = the
    property) or ``card``. ``validates``: existing rows are checked against it before anything is
    written. ``data_loss``: the step drops stored values (needs ``allow_data_loss``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: StepKind
    table_key: str
    detail: str
    from_table_key: str | None = None
    property: str | None = None
    from_property: str | None = None
    default: Any = None
    constraint: Literal["unique", "range", "check", "card"] | None = None
    members: tuple[str, ...] = ()
    validates: bool = False
    data_loss: bool = False

    def sort_key(self) -> tuple[str, int, str, str]:
        """Table key, kind, property, detail: the order steps are listed and applied in."""
        return (self.table_key, _KIND_ORDER[self.kind], self.property or "", self.detail)


class SchemaPlan(BaseModel):
    """The steps from schema ``from_schema_id`` to ``to_schema_id`` (ids: :attr:`Catalog.version_id`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_schema_id: str
    to_schema_id: str
    steps: list[SchemaStep]

    @property
    def data_loss(self) -> bool:
        """Whether any step drops stored values."""
        return any(step.data_loss for step in self.steps)

    @property
    def changes_source(self) -> bool:
        """Whether the schema source changes at all (comments and layout included)."""
        return self.from_schema_id != self.to_schema_id


class SchemaVersion(BaseModel):
    """One accepted schema version, as recorded under ``_schemas/``: its source, the version it changed (None: the first) and the steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_id: str
    parent_id: str | None
    source: str
    steps: list[SchemaStep]
    actor: str
    accepted_at: int


class SchemaChangeRefused(BadRequest):
    """A schema change with steps that cannot be applied; ``details["refused"]`` lists each."""


def _meta(metadata: tuple[Metadata, ...], name: str) -> Any:
    for item in metadata:
        if item.name == name and item.args:
            return item.args[0]
    return None


@dataclass
class _Planner:
    old: Catalog
    new: Catalog
    steps: list[SchemaStep] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)

    def refuse(self, code: str, message: str, table_key: str, prop: str | None = None) -> None:
        self.refused.append({"code": code, "table_key": table_key, "property": prop, "message": message})

    def step(self, kind: StepKind, table_key: str, detail: str, **more: Any) -> None:
        self.steps.append(SchemaStep(kind=kind, table_key=table_key, detail=detail, **more))

    def old_key_of(self, table: TableDef) -> str | None:
        """The old table key ``table`` continues, ``""`` for a new type, None for a refused rename."""
        if table.table_key in self.old.table_keys():
            return table.table_key
        renamed = _meta(table.metadata, "rename_from")
        if renamed is None:
            return ""
        old_key = f"{table.kind}:{renamed}"
        if old_key in self.old.table_keys():
            return old_key
        other = "edge" if table.kind == "node" else "node"
        if f"{other}:{renamed}" in self.old.table_keys():
            self.refuse(
                "kind_change", f"{table.table_key} is renamed from the {other} type {renamed}: a type cannot change kind", table.table_key
            )
        else:
            self.refuse(
                "rename_unknown",
                f'{table.table_key} has @rename_from("{renamed}") but the accepted schema has no {table.kind} type {renamed}',
                table.table_key,
            )
        return None

    def plan(self) -> list[SchemaStep]:
        continued: dict[str, str] = {}  # old key -> new key
        for table in self.new.tables():
            old_key = self.old_key_of(table)
            if old_key == "":
                self.step("add_type", table.table_key, f"add {table.kind} type {table.type_name}")
            if not old_key:
                continue
            if old_key in continued:
                self.refuse("rename_twice", f"{old_key} is continued by both {continued[old_key]} and {table.table_key}", table.table_key)
                continue
            continued[old_key] = table.table_key
            if old_key != table.table_key:
                self.step("rename_type", table.table_key, f"rename {old_key} to {table.table_key}", from_table_key=old_key)
        type_names = {old_key.split(":", 1)[1]: new_key.split(":", 1)[1] for old_key, new_key in continued.items()}
        for old_key in self.old.table_keys():
            if old_key not in continued:
                self.step("drop_type", old_key, f"drop {old_key.replace(':', ' type ')} and every row of it", data_loss=True)
        for old_key, new_key in continued.items():
            self.table(self.old.table(old_key), self.new.table(new_key), type_names)
        return sorted(self.steps, key=SchemaStep.sort_key)

    def table(self, old: TableDef, new: TableDef, type_names: dict[str, str]) -> None:
        key = new.table_key
        if new.kind == "edge" and (type_names.get(str(old.from_type)), type_names.get(str(old.to_type))) != (new.from_type, new.to_type):
            self.refuse(
                "endpoints_change",
                f"{key} connects {old.from_type} -> {old.to_type}; its endpoints cannot change (declare a new edge type instead)",
                key,
            )
        names: dict[str, str] = {}  # new property -> old property
        for prop in new.properties:
            renamed = _meta(prop.metadata, "rename_from")
            if old.has_property(prop.name) or renamed is None:
                names[prop.name] = prop.name
            elif renamed in ("id", "src", "dst"):
                self.refuse(
                    "key_column",
                    f"{key}.{prop.name} cannot be renamed from {renamed!r}: the id and endpoint columns are not properties",
                    key,
                    prop.name,
                )
            elif not old.has_property(str(renamed)):
                self.refuse(
                    "rename_unknown",
                    f'{key}.{prop.name} has @rename_from("{renamed}") but {old.table_key} has no property {renamed}',
                    key,
                    prop.name,
                )
            elif str(renamed) in names.values() or new.has_property(str(renamed)):
                self.refuse("rename_twice", f"{key}: property {renamed} is continued twice (rename it in one step)", key, prop.name)
            else:
                names[prop.name] = str(renamed)
        kept = {old_name for old_name in names.values() if old.has_property(old_name)}
        for prop in old.properties:
            if prop.name not in kept:
                self.step("drop_property", key, f"drop {key}.{prop.name} and its values", property=prop.name, data_loss=True)
        for prop in new.properties:
            old_name = names.get(prop.name)
            if old_name is None:
                continue  # its rename was refused
            if not old.has_property(old_name):
                self.added_property(key, prop)
                continue
            if old_name != prop.name:
                self.step("rename_property", key, f"rename {key}.{old_name} to {prop.name}", property=prop.name, from_property=old_name)
            self.property(key, old.property(old_name), prop)
        if old.key != (None if new.key is None else tuple(names.get(member, member) for member in new.key)):
            self.refuse(
                "key_change", f"{key} changes its @key ({old.key} -> {new.key}): ids are derived from the key, which cannot change", key
            )
        self.constraints(old, new, names)

    def added_property(self, key: str, prop: Property) -> None:
        default = _meta(prop.metadata, "default")
        if prop.nullable and default is None:
            self.step("add_property", key, f"add {key}.{prop.name}: {prop.type}? (existing rows read null)", property=prop.name)
            return
        if default is None:
            self.refuse(
                "required_without_default",
                f"{key}.{prop.name} is a new required property: existing rows have no value; declare it optional "
                f"({prop.name}: {prop.type}?) or give @default(value)",
                key,
                prop.name,
            )
            return
        if not isinstance(prop.type, (ScalarType, EnumType)):
            self.refuse("default_type", f"{key}.{prop.name}: @default is for scalar and enum properties, not {prop.type}", key, prop.name)
            return
        try:
            coerce_property(prop, default)
        except InvalidValue as error:
            self.refuse("default_invalid", f"{key}.{prop.name}: @default({default!r}) {error}", key, prop.name)
            return
        self.step(
            "add_property", key, f"add {key}.{prop.name}: {prop.type} (existing rows get {default!r})", property=prop.name, default=default
        )

    def property(self, key: str, old: Property, new: Property) -> None:
        if old.type != new.type:
            widened = isinstance(old.type, EnumType) and isinstance(new.type, EnumType) and set(old.type.values) <= set(new.type.values)
            if not widened:
                self.refuse(
                    "type_change",
                    f"{key}.{new.name} changes type {old.type} -> {new.type}: add a new property and drop the old one instead",
                    key,
                    new.name,
                )
                return
            self.step("widen_enum", key, f"widen {key}.{new.name} to {new.type}", property=new.name)
        if old.nullable and not new.nullable:
            self.refuse(
                "nullability_change",
                f"{key}.{new.name} changes from optional to required: rows may hold null; "
                "add a new required property with @default instead",
                key,
                new.name,
            )
        elif new.nullable and not old.nullable:
            self.step("relax_property", key, f"make {key}.{new.name} optional", property=new.name)
        if old.index != new.index:
            self.step("change_index", key, f"{'add' if new.index else 'remove'} @index on {key}.{new.name}", property=new.name)
        if [m for m in old.metadata if m.name != "rename_from"] != [m for m in new.metadata if m.name != "rename_from"]:
            self.step("change_metadata", key, f"change the metadata of {key}.{new.name}", property=new.name)

    def constraints(self, old: TableDef, new: TableDef, names: dict[str, str]) -> None:
        key = new.table_key

        def renamed(members: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(names.get(member, member) for member in members)

        old_unique = {(p.name,) for p in old.properties if p.unique} | set(old.composite_unique)
        new_unique = {renamed((p.name,)) for p in new.properties if p.unique} | {renamed(m) for m in new.composite_unique}
        spelled = {renamed(members): members for members in [(p.name,) for p in new.properties if p.unique] + list(new.composite_unique)}
        for members in sorted(new_unique - old_unique):
            self.step(
                "add_constraint",
                key,
                f"add @unique({', '.join(spelled[members])}) on {key}",
                constraint="unique",
                members=spelled[members],
                validates=True,
            )
        for members in sorted(old_unique - new_unique):
            self.step("drop_constraint", key, f"remove @unique({', '.join(members)}) from {key}", constraint="unique", members=members)
        old_rules: list[RangeRule | CheckRule] = [*old.ranges, *old.checks]
        new_rules: list[RangeRule | CheckRule] = [*new.ranges, *new.checks]
        before = {(_rule_kind(rule), rule.property): rule for rule in old_rules}
        for rule in new_rules:
            was = before.pop((_rule_kind(rule), names.get(rule.property, rule.property)), None)
            if was is None or msgspec.structs.replace(was, property=rule.property) != rule:
                text = f"add {rule.describe()} on {key}"
                self.step("add_constraint", key, text, constraint=_rule_kind(rule), members=(rule.property,), validates=True)
        for (kind, prop), gone in sorted(before.items()):
            self.step("drop_constraint", key, f"remove {gone.describe()} from {key}", constraint=kind, members=(prop,))
        if old.cardinality != new.cardinality:
            self.step("add_constraint", key, f"change {key} to @card({new.cardinality.describe()})", constraint="card", validates=True)
        if set(old.indexes) != {renamed(m) for m in new.indexes}:
            self.step("change_index", key, f"change the @index declarations of {key}")
        if [m for m in old.metadata if m.name != "rename_from"] != [m for m in new.metadata if m.name != "rename_from"]:
            self.step("change_metadata", key, f"change the metadata of {key}")


def _rule_kind(rule: RangeRule | CheckRule) -> Literal["range", "check"]:
    return "range" if isinstance(rule, RangeRule) else "check"


def plan_change(old: Catalog, new: Catalog) -> SchemaPlan:
    """The steps from ``old`` to ``new`` (see the module docstring); :class:`SchemaChangeRefused` if any is refused."""
    planner = _Planner(old, new)
    steps = planner.plan()
    if planner.refused:
        refused = sorted(planner.refused, key=lambda item: (item["table_key"], item["property"] or "", item["code"]))
        raise SchemaChangeRefused(
            f"the schema change has {len(refused)} step(s) that cannot be applied; nothing was written: "
            + "; ".join(item["message"] for item in refused),
            {"refused": refused},
        )
    return SchemaPlan(from_schema_id=old.version_id, to_schema_id=new.version_id, steps=steps)


class AddedColumn(msgspec.Struct, frozen=True):
    """A column a plan adds to an existing table: its field and the value existing rows get (None: null)."""

    field: pa.Field
    default: Any = None


class TableChange(msgspec.Struct, frozen=True):
    """What one plan does to the columns of one existing table (``old_key`` in the old schema)."""

    old_key: str
    new_key: str
    drops: tuple[str, ...] = ()
    renames: tuple[tuple[str, str], ...] = ()
    relaxed: tuple[str, ...] = ()
    adds: tuple[AddedColumn, ...] = ()

    @property
    def touches_columns(self) -> bool:
        """Whether the table's physical columns change."""
        return bool(self.drops or self.renames or self.relaxed or self.adds)

    def adapt(self, rows: pa.Table) -> pa.Table:
        """``rows`` of the table under the old schema as the new schema holds them (column order kept, adds last)."""
        rows = rows.drop_columns([name for name in self.drops if name in rows.column_names])
        mapping = dict(self.renames)
        rows = rows.rename_columns([mapping.get(name, name) for name in rows.column_names])
        for added in self.adds:
            rows = rows.append_column(added.field, pa.array([added.default] * rows.num_rows, added.field.type))
        return rows


def table_changes(plan: SchemaPlan, old: Catalog, new: Catalog) -> dict[str, TableChange]:
    """Per existing table that the new schema keeps (by old key): what ``plan`` does to its columns."""
    renamed_types = {step.from_table_key: step.table_key for step in plan.steps if step.kind == "rename_type"}
    dropped = {step.table_key for step in plan.steps if step.kind == "drop_type"}
    changes = {}
    for old_key in old.table_keys():
        if old_key in dropped:
            continue
        new_key = renamed_types.get(old_key, old_key)
        steps = [step for step in plan.steps if step.table_key == new_key]
        table = new.table(new_key)
        adds = []
        for step in steps:
            if step.kind != "add_property":
                continue
            prop = table.property(str(step.property))
            value = None if step.default is None else coerce_property(prop, step.default)
            adds.append(AddedColumn(pa.field(prop.name, prop.type.arrow_type(), nullable=prop.nullable), value))
        changes[old_key] = TableChange(
            old_key=old_key,
            new_key=new_key,
            drops=tuple(str(s.property) for s in plan.steps if s.kind == "drop_property" and s.table_key == new_key),
            renames=tuple((str(s.from_property), str(s.property)) for s in steps if s.kind == "rename_property"),
            relaxed=tuple(str(s.property) for s in steps if s.kind == "relax_property"),
            adds=tuple(adds),
        )
    return changes


class SchemaChain(msgspec.Struct, frozen=True):
    """The table changes of consecutive plans, oldest first: rows of an older image read as the newest schema."""

    links: tuple[dict[str, TableChange], ...]

    def old_key(self, new_key: str) -> str | None:
        """The table key the oldest schema gave the table ``new_key`` names; None if it did not have it."""
        key: str | None = new_key
        for link in reversed(self.links):
            key = next((change.old_key for change in link.values() if change.new_key == key), None)
            if key is None:
                return None
        return key

    def adapt(self, old_key: str, rows: pa.Table) -> pa.Table:
        """Rows of table ``old_key`` under the oldest schema as the newest one holds them."""
        key = old_key
        for link in self.links:
            change = link[key]
            rows, key = change.adapt(rows), change.new_key
        return rows
