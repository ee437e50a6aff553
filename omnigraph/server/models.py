"""Request bodies of the HTTP API, and the envelopes around its results.

The response bodies are the result classes of :mod:`omnigraph.results` (the same
the Python API returns and the CLI prints with ``--json``): FastAPI builds the OpenAPI schema at
``/docs`` from them, so a result is declared once. What is only HTTP is here: the request bodies,
the error envelope, the health and version documents, and the lists that wrap results.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from omnigraph.results import Branch, Commit
from omnigraph.server.names import BranchName


class ErrorBody(BaseModel):
    """The fields of an error: its code, its message and its structured details."""

    code: str
    message: str
    details: dict[str, Any]


class ErrorResponse(BaseModel):
    """Every error: ``{"error": {code, message, details}}`` (``docs/errors.md`` lists the codes and statuses)."""

    error: ErrorBody


class Health(BaseModel):
    """``GET /healthz``: the process is alive."""

    status: Literal["ok"]


class VersionInfo(BaseModel):
    """``GET /version``: the program, its version and the format it writes."""

    program: str
    version: str
    format: str = Field(description="The format this server writes.")


class BranchList(BaseModel):
    """``GET /branches``: every branch, ``main`` first, then by name."""

    branches: list[Branch]


class BranchCreate(BaseModel):
    """``POST /branches``: the new branch's name and the branch it starts from."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: BranchName
    from_branch: BranchName = Field(default="main", alias="from")


class MergeRequest(BaseModel):
    """``POST /branches/{name}/merge``: the branch to merge into."""

    model_config = ConfigDict(extra="forbid")

    into: BranchName = "main"


class CommitList(BaseModel):
    """``GET /branches/{branch}/commits``: the branch's commits, newest first."""

    branch: str
    commits: list[Commit]


class MutateRequest(BaseModel):
    """``POST /branches/{branch}/mutate``: a ``.gq`` source, the query to run and its parameters."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="The .gq source.")
    name: str | None = Field(default=None, description="Which query of the source to run.")
    params: dict[str, Any] = Field(default_factory=dict)
    if_commit: str | None = Field(
        default=None,
        description="Write only if the branch head is this commit (else 412 precondition_failed, nothing written); "
        "the If-Match header says the same.",
    )


class SchemaRequest(BaseModel):
    """``POST /schema/plan`` and ``POST /schema/apply``: the proposed schema source and, for apply, consent to drop data."""

    model_config = ConfigDict(extra="forbid")

    schema_source: str = Field(alias="schema", description="The proposed .pg schema text.")
    allow_data_loss: bool = Field(default=False, description="Apply steps that drop types or properties (apply only).")
