"""The playbook document: named variables and an ordered list of steps.

```yaml
name: upgrade
description: ...
variables:
  owner: {description: who runs the migration, default: "${user}"}
steps:
  - id: run
    title: Migrate every branch
    action: migrate            # one of omnigraph.playbooks.actions.ACTIONS
    explain: what the step will do, shown before it acts
    confirm: true              # ask before acting (unless --yes)
    with: {owner: "${owner}"}  # action parameters; ${name} expands variables
```
Variables: ``graph``, ``run_id`` and ``user`` always exist; ``--var NAME=VALUE`` sets others;
steps add outputs (``token``, ``migration_id``, ...) for later steps.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from omnigraph.engine.errors import BadRequest
from omnigraph.playbooks.actions import ACTIONS

# The libyaml-backed safe loader when available: the pure-Python one takes seconds per MB.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

STEP_ID = re.compile(r"[a-z][a-z0-9-]*")
BUILT_IN_VARIABLES = ("graph", "run_id", "user")


class Variable(BaseModel):
    """A variable the playbook declares: what it is for, and its default (None: it must be set)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    default: str | None = None


class Step(BaseModel):
    """One step: its id, what it does (``action`` with the ``with`` parameters) and whether it asks first."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    title: str
    action: str
    explain: str
    confirm: bool = False
    params: dict[str, str] = Field(default_factory=dict, alias="with")

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not STEP_ID.fullmatch(value):
            raise ValueError(f"step id {value!r} must be lowercase letters, digits and '-'")
        return value

    @field_validator("action")
    @classmethod
    def _known_action(cls, value: str) -> str:
        if value not in ACTIONS:
            raise ValueError(f"unknown action {value!r}; actions: {', '.join(sorted(ACTIONS))}")
        return value

    def referenced_variables(self) -> set[str]:
        """Names this step expands with ``${name}``."""
        names: set[str] = set()
        for text in [self.explain, *self.params.values()]:
            for match in string.Template.pattern.finditer(text):
                name = match.group("named") or match.group("braced")
                if name:
                    names.add(name)
        return names


class Playbook(BaseModel):
    """A whole playbook document (see the module docstring): its variables and its steps, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    audience: str
    variables: dict[str, Variable] = Field(default_factory=dict)
    steps: list[Step]

    @model_validator(mode="after")
    def _unique_step_ids(self) -> Playbook:
        ids = [step.id for step in self.steps]
        repeated = sorted({step_id for step_id in ids if ids.count(step_id) > 1})
        if repeated:
            raise ValueError(f"step ids must be unique; repeated: {', '.join(repeated)}")
        if not ids:
            raise ValueError("a playbook needs at least one step")
        return self

    def settable_variables(self) -> set[str]:
        """Names ``--var`` may set: declared variables and any a step expands (not built-ins)."""
        names = set(self.variables)
        for step in self.steps:
            names |= step.referenced_variables()
        return names - set(BUILT_IN_VARIABLES)


BUNDLED_DIR = Path(__file__).resolve().parent


def bundled_playbooks() -> list[str]:
    """The file names of the playbooks shipped with the package, sorted."""
    return sorted(path.name for path in BUNDLED_DIR.glob("*.yaml"))


def load_playbook(reference: str) -> tuple[Playbook, Path]:
    """A playbook from a path, or from a bundled name (``upgrade`` or ``upgrade.yaml``)."""
    path = Path(reference)
    if not path.exists():
        name = reference if reference.endswith(".yaml") else f"{reference}.yaml"
        candidate = BUNDLED_DIR / Path(name).name
        if not candidate.exists():
            raise BadRequest(
                f"no playbook {reference!r}; bundled playbooks: {', '.join(bundled_playbooks())}",
                {"playbook": reference},
            )
        path = candidate
    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
        raise BadRequest(f"playbook {path} is not valid YAML: {error}", {"playbook": str(path)}) from error
    try:
        return Playbook.model_validate(document), path
    except ValidationError as error:
        problems = [f"{'.'.join(str(part) for part in item['loc']) or 'document'}: {item['msg']}" for item in error.errors()]
        raise BadRequest(f"playbook {path} is not valid: " + "; ".join(problems), {"playbook": str(path), "problems": problems}) from error
