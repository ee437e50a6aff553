"""Request and response bodies of the HTTP API (the OpenAPI schema at ``/docs`` is built from them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any]


class ErrorResponse(BaseModel):
    """Every error: ``{"error": {code, message, details}}`` (codes and statuses of REFERENCE.md)."""

    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    """``writable`` only when the stamp is one this program writes and no migration claim is held."""

    format: str | None
    writable: bool
    reason: str


class VersionInfo(BaseModel):
    program: str
    version: str
    format: str = Field(description="The format this server writes.")


class TableInfo(BaseModel):
    table_key: str
    path: str
    table_branch: str | None
    version: int
    rows: int
    pk: list[str]


class Snapshot(BaseModel):
    branch: str
    manifest_version: int
    format: str
    tables: list[TableInfo]


class BranchInfo(BaseModel):
    name: str
    parent_branch: str | None
    parent_manifest_version: int | None
    incarnation: str
    manifest_version: int
    head: str


class BranchList(BaseModel):
    branches: list[BranchInfo]


class BranchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    from_branch: str = Field(default="main", alias="from")


class BranchCreated(BaseModel):
    name: str
    parent_branch: str | None
    incarnation: str


class BranchDeleted(BaseModel):
    deleted: str


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    into: str = "main"


class CommitInfo(BaseModel):
    commit_id: str
    parents: list[str]
    actor: str
    message: str
    committed_at: int


class CommitList(BaseModel):
    branch: str
    commits: list[CommitInfo]


class LoadResponse(BaseModel):
    branch: str
    mode: Literal["append", "merge", "overwrite"]
    commits: list[str]
    manifest_version: int | None
    rows: dict[str, int]


class MutateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="The .gq source.")
    name: str | None = Field(default=None, description="Which query of the source to run.")
    params: dict[str, Any] = Field(default_factory=dict)


class MutateResponse(BaseModel):
    affected_nodes: int = Field(description="Node rows touched, counted per statement.")
    affected_edges: int = Field(description="Edge rows touched, counted per statement.")
    distinct_nodes: int = Field(description="Distinct node rows the commit changed.")
    distinct_edges: int = Field(description="Distinct edge rows the commit changed.")
    commit: str | None = Field(description="The published commit; null when the mutation matched nothing.")


class MergeCounts(BaseModel):
    inserted: int
    updated: int
    deleted: int


class MergeResponse(BaseModel):
    outcome: Literal["up_to_date", "fast_forward", "merged"]
    source: str
    into: str
    base: str
    source_head: str
    target_head: str
    commit: str | None
    parents: list[str]
    changes: dict[str, MergeCounts]
