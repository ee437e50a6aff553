"""The playbook document: named variables and an ordered list of steps.

```yaml
name: upgrade
description: ...
variables:
  owner: {description: who runs the migration, default: "${user}"}
steps:
  - id: run
    title: Migrate every branch
    action: migrate            # one of playbooks.actions.ACTIONS
    explain: what the step will do, shown before it acts
    confirm: true              # ask before acting (unless --yes)
    with: {owner: "${owner}"}  # action parameters; ${name} expands variables
```
Variables: ``graph``, ``run_id`` and ``user`` always exist; ``--var NAME=VALUE`` sets others;
steps add outputs (``token``, ``migration_id``, ...) for later steps.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.errors import BadRequest

STEP_ID = re.compile(r"[a-z][a-z0-9-]*")


class Variable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    default: str | None = None


class Step(BaseModel):
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


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    audience: str
    variables: dict[str, Variable] = Field(default_factory=dict)
    steps: list[Step]

    @model_validator(mode="after")
    def _unique_step_ids(self) -> Playbook:
        ids = [step.id for step in self.steps]
        if len(ids) != len(set(ids)):
            raise ValueError("step ids must be unique")
        if not ids:
            raise ValueError("a playbook needs at least one step")
        return self


BUNDLED_DIR = Path(__file__).resolve().parent


def bundled_playbooks() -> list[str]:
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
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Playbook.model_validate(document), path
    except (yaml.YAMLError, ValueError) as error:
        raise BadRequest(f"playbook {path} is not valid: {error}", {"playbook": str(path)}) from error
