"""Lance datasets of a graph root: open one at a (branch, version) or a pinned image; list and fork branches.

A *table branch* of ``None`` means the dataset's main branch. Lance numbers a branch's versions
from its fork point: a branch created from ``(parent, v)`` starts at version ``v``.

A graph branch pins each of its tables at one immutable *image*: a dataset path, a Lance table
branch of that dataset (``None`` = the dataset's main branch) and a version of that branch
(:class:`ImageRef`). Every fixed-version open in the project goes through :func:`open_pinned`
with an :class:`ImageRef` (a reader's through :func:`open_pinned_for_read`, which shares
handles); :func:`open_dataset` with no version is for the latest version of a branch (a HEAD,
which is not an image: it can move).

Nothing here writes table rows (it creates empty datasets and forks, and deletes branches); row
writes go through the fenced door (:mod:`omnigraph.engine.door.table_store`) or the legacy writer
(:mod:`omnigraph.engine.door.legacy`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections import OrderedDict

import lance
import msgspec
import pyarrow as pa
from tenacity import retry, retry_if_exception_type, retry_if_result, stop_after_attempt, stop_after_delay, wait_exponential_jitter

from omnigraph.engine.storage.names import PK_METADATA_KEY
from omnigraph.engine.storage.store import GraphStore


class LanceBranch(msgspec.Struct, frozen=True):
    """A Lance branch of one dataset: its parent ref and its identifier (incarnation)."""

    name: str
    parent_branch: str | None
    parent_version: int
    identifier: str


_SESSION = lance.Session()  # type: ignore[attr-defined]  # lance re-exports Session without listing it in its __all__
_ANCHORS: dict[tuple[str, tuple[tuple[str, str], ...]], lance.LanceDataset] = {}


def open_dataset(store: GraphStore, rel: str, branch: str | None = None, version: int | None = None) -> lance.LanceDataset:
    """The dataset at ``rel`` checked out at ``(branch, version)``; ``version=None`` = latest.

    Every open shares one process-wide Lance session, whose caches hold immutable things only
    (manifests of fixed versions, file metadata, indices), so "latest" is always re-resolved.
    A fixed version of main is opened directly, and a Lance branch is checked out from a cached
    handle on the dataset (its *anchor*, at whatever version it was opened), so neither lists
    main's versions: on an object store that listing is the costliest request of an open.
    """
    return open_dataset_at(store.dataset_uri(rel), store.storage_options, branch, version)


def open_dataset_at(
    uri: str, storage_options: dict[str, str] | None, branch: str | None = None, version: int | None = None
) -> lance.LanceDataset:
    """:func:`open_dataset` from plain values: the dataset's URI and its Lance storage options.

    For a process that has the values but no :class:`GraphStore` (a task on another machine).
    """
    if branch is None:
        return lance.dataset(uri, version=version, storage_options=storage_options, session=_SESSION)
    key = (uri, tuple(sorted((storage_options or {}).items())))
    anchor = _ANCHORS.get(key)
    if anchor is not None:
        try:
            return anchor.checkout_version((branch, version))
        except (ValueError, OSError):
            _ANCHORS.pop(key, None)  # another thread may drop it too; a fresh handle is opened below
    anchor = lance.dataset(uri, storage_options=storage_options, session=_SESSION)
    checked_out = anchor.checkout_version((branch, version))
    _ANCHORS[key] = anchor
    return checked_out


READ_HANDLES = 64
"""How many handles on (image of a main branch, commit) :func:`open_pinned_for_read` keeps (least recently used dropped).

Each holds its version's Lance manifest (about 0.6 KB a fragment), which the process's Lance
session usually holds already: the bound keeps a process that reads many commits from keeping
the manifests of old versions alive."""
_READ_LOCK = threading.Lock()
_READ_HANDLES: OrderedDict[tuple[str, tuple[tuple[str, str], ...], int, str], lance.LanceDataset] = OrderedDict()
_SHARED: weakref.WeakSet[lance.LanceDataset] = weakref.WeakSet()
"""Every handle :func:`open_pinned_for_read` handed out (kept in :data:`_READ_HANDLES` or not): its version is fixed for good."""
_DIGESTS: weakref.WeakKeyDictionary[lance.LanceDataset, str] = weakref.WeakKeyDictionary()
"""The :func:`content_digest` of each handle in :data:`_SHARED`, once computed."""


def content_digest(dataset: lance.LanceDataset) -> str:
    """The identity of the rows ``dataset`` holds as checked out: a digest of its fragments' data and deletion files.

    Lance never rewrites a data or deletion file (each has a fresh name), so two checkouts with
    the same digest hold the same rows in the same order, even when one is a version of a branch
    deleted and created again under the same name (which reuses version numbers). Computed from
    the checked-out manifest, without reading any file; once per handle of
    :func:`open_pinned_for_read` (a shared handle never changes version), for any other on each call.
    """
    with _READ_LOCK:
        shared = dataset in _SHARED
        known = _DIGESTS.get(dataset) if shared else None
    if known is not None:
        return known
    files = hashlib.blake2b(digest_size=16)
    for fragment in dataset.get_fragments():
        deletion = fragment.deletion_file()
        names = [data.path for data in fragment.data_files()]
        files.update(f"{fragment.fragment_id}:{','.join(names)}:{deletion or ''};".encode())
    digest = files.hexdigest()
    if shared:
        with _READ_LOCK:
            _DIGESTS[dataset] = digest
    return digest


def create_empty_dataset(store: GraphStore, rel: str, schema: pa.Schema) -> lance.LanceDataset:
    """Create an empty dataset at ``rel`` with ``schema`` and stable row ids (version 1)."""
    return lance.write_dataset(
        schema.empty_table(),
        store.dataset_uri(rel),
        schema=schema,
        mode="create",
        enable_stable_row_ids=True,
        storage_options=store.storage_options,
    )


def latest_version(store: GraphStore, rel: str, branch: str | None) -> int:
    """The HEAD version of ``branch`` of the dataset at ``rel``."""
    return int(open_dataset(store, rel, branch, None).version)


def primary_key(schema: pa.Schema) -> list[str]:
    """Names of the fields carrying Lance's unenforced-primary-key metadata, in schema order."""
    keys: list[str] = []
    for schema_field in schema:
        metadata = schema_field.metadata or {}
        if metadata.get(PK_METADATA_KEY.encode()) == b"true":
            keys.append(schema_field.name)
    return keys


@retry(
    retry=retry_if_exception_type((ValueError, OSError)),
    stop=stop_after_attempt(5),
    wait=wait_exponential_jitter(multiplier=0.02, max=0.2, jitter=0.02),
    reraise=True,
)
def list_branches(dataset: lance.LanceDataset) -> dict[str, LanceBranch]:
    """Every Lance branch of a dataset (main excluded), by name.

    Lance lists the ref files, then reads each: a ref deleted in between (a concurrent branch
    delete) fails the listing with "Not found", so the listing is taken again (a few times).
    """
    branches: dict[str, LanceBranch] = {}
    for name, info in sorted(dataset.branches.list().items()):
        identifier = info["branch_identifier"][-1][1] if info["branch_identifier"] else ""
        branches[name] = LanceBranch(
            name=name,
            parent_branch=info["parent_branch"],
            parent_version=int(info["parent_version"]),
            identifier=identifier,
        )
    return branches


BRANCH_REFS_DIR = "_refs/branches"
"""Where a Lance dataset keeps one ref document per branch, ``<name>.json`` (Lance's layout)."""


def read_branch(store: GraphStore, rel: str, name: str) -> LanceBranch | None:
    """Lance branch ``name`` of the dataset at ``rel``, or None if it has none of that name.

    Reads the branch's one ref document, the same one :func:`list_branches` reads for every
    branch after listing them all: one object read instead of a listing plus one per branch. The
    document's layout is Lance's (the Lance surface-guard tests check that both agree).
    """
    try:
        ref = json.loads(store.read_bytes(f"{rel}/{BRANCH_REFS_DIR}/{name}.json"))
    except FileNotFoundError:
        return None
    mapping = ref["identifier"]["version_mapping"]
    return LanceBranch(
        name=name,
        parent_branch=ref["parentBranch"],
        parent_version=int(ref["parentVersion"]),
        identifier=mapping[-1][1] if mapping else "",
    )


class Fork(msgspec.Struct, frozen=True):
    """The outcome of :func:`fork_or_adopt`: the Lance branch, and whether this call created it.

    ``created`` is False when an existing branch of that name, forked from the same origin, was adopted.
    """

    branch: LanceBranch
    created: bool


class ForkInterrupted(Exception):
    """A fork's branch exists as data but its ref never appeared: a fork was interrupted inside Lance.

    ``cause`` is the error Lance raised when the branch was created.
    """

    def __init__(self, rel: str, branch: str, cause: OSError) -> None:
        super().__init__(f"{rel}: Lance branch {branch!r} exists as data without a ref ({cause})")
        self.cause = cause


class ForeignFork(Exception):
    """A Lance branch of the fork's name exists but not with the fork's origin: ``existing``."""

    def __init__(self, rel: str, existing: LanceBranch) -> None:
        super().__init__(
            f"{rel}: Lance branch {existing.name!r} is forked from "
            f"({existing.parent_branch or 'main'}, v{existing.parent_version}), identifier {existing.identifier}"
        )
        self.existing = existing


def fork_or_adopt(
    store: GraphStore,
    rel: str,
    branch: str,
    parent_branch: str | None,
    parent_version: int,
    identifier: str | None = None,
) -> Fork:
    """Fork ``branch`` of the dataset at ``rel`` from exactly ``(parent_branch, parent_version)``, or adopt it.

    The branch adopted is the one of that name that an earlier (crashed or concurrent) fork made.
    An existing branch is adopted only if its parent ref is exactly that one and, when
    ``identifier`` is given, its identifier is ``identifier``; otherwise :class:`ForeignFork`.
    A create that fails because the branch appeared meanwhile waits for its ref (a fork writes
    data, then its ref) and adopts it under the same rule; a ref that never appears is
    :class:`ForkInterrupted`. Callers turn both into the error of their protocol.
    """
    existing = read_branch(store, rel, branch)
    if existing is None:
        reference = (parent_branch if parent_branch is not None else "main", parent_version)
        try:
            open_dataset(store, rel).create_branch(branch, reference=reference)
        except OSError as error:
            existing = wait_for_branch(store, rel, branch)
            if existing is None:
                raise ForkInterrupted(rel, branch, error) from error
        else:
            created = wait_for_branch(store, rel, branch)
            if created is None:
                raise RuntimeError(f"{rel}: Lance created branch {branch!r} but its ref cannot be read")
            return Fork(created, created=True)
    same_origin = existing.parent_branch == parent_branch and existing.parent_version == parent_version
    if not same_origin or (identifier is not None and existing.identifier != identifier):
        raise ForeignFork(rel, existing)
    return Fork(existing, created=False)


def remove_unreferenced_fork(store: GraphStore, rel: str, branch: str) -> bool:
    """Remove what an interrupted fork of ``branch`` left in the dataset at ``rel``; True if there was any.

    What it left is its ``tree/<branch>`` directory (a fork writes its manifest there, then its
    ref). A branch with a ref is never touched (False).

    Only for a caller that owns the name ``branch`` on that dataset, so that no other fork of it
    can be in flight: the migration, under its claim, for the fork its unit's sidecar planned;
    recovery, for the fork a dead writer's intent planned when no live writer's intent targets
    it, and for the table branches of a graph branch that no longer exists, under its lease.
    Lance refuses to fork a name whose directory is left without a ref, and this is what lets
    the fork be made again.
    """
    if read_branch(store, rel, branch) is not None or not store.list(f"{rel}/tree/{branch}"):
        return False
    store.delete_tree(f"{rel}/tree/{branch}")
    return True


@retry(
    retry=retry_if_result(lambda found: found is None),
    stop=stop_after_delay(5.0),
    wait=wait_exponential_jitter(multiplier=0.02, max=0.5, jitter=0.02),
    retry_error_callback=lambda state: None,
)
def wait_for_branch(store: GraphStore, rel: str, branch: str) -> LanceBranch | None:
    """The Lance branch ``branch`` once its ref is visible (a fork writes data, then its ref).

    None if it does not appear within a few seconds.
    """
    return read_branch(store, rel, branch)


def delete_branch_if_present(store: GraphStore, rel: str, branch: str) -> bool:
    """Delete Lance branch ``branch`` of the dataset at ``rel``; False if it did not exist."""
    dataset = open_dataset(store, rel)
    if branch not in dataset.branches.list():
        return False
    dataset.branches.delete(branch)
    return True


class ImageRef(msgspec.Struct, frozen=True, order=True):
    """One immutable table image: ``path`` checked out on Lance branch ``branch`` at ``version``."""

    path: str
    branch: str | None
    version: int

    def at(self, version: int) -> ImageRef:
        """The image of the same table branch at another version."""
        return ImageRef(self.path, self.branch, version)

    def on(self, branch: str | None) -> ImageRef:
        """The image at the same version number on another Lance branch of the same dataset.

        Lance numbers a fork's versions from its fork point, so a fork created from this image
        starts at this image's version: ``image.on(fork)`` is the fork's first image.
        """
        return ImageRef(self.path, branch, self.version)


def open_pinned(store: GraphStore, image: ImageRef) -> lance.LanceDataset:
    """The dataset checked out at exactly ``image``; Lance's errors pass through unchanged."""
    return open_dataset(store, image.path, image.branch, image.version)


def open_pinned_for_read(store: GraphStore, image: ImageRef, commit: str) -> lance.LanceDataset:
    """:func:`open_pinned` for a reader of graph commit ``commit``, which must only read through the handle: it may be shared.

    An image on a main branch is opened once per process for each commit that pins it and its
    handle shared by every reader of that commit (:data:`READ_HANDLES` of them kept, least
    recently used dropped). The path and version alone do not name the same rows for the life of
    a process: a table added by a schema change lives at a path derived from the schema version,
    so a graph root removed and created again with the same change holds that table at the same
    path and versions with other rows. A commit id is a ULID minted when the commit is made, so
    two incarnations of a root never share one, and within one incarnation a version of a main
    branch never changes. A Lance write moves the handle it is called on to the version it
    commits, so a shared handle is never written through. An image on a Lance branch (whose
    versions are numbered again when the branch is deleted and created again) is opened anew.
    """
    if image.branch is not None:
        return open_pinned(store, image)
    key = (store.dataset_uri(image.path), tuple(sorted((store.storage_options or {}).items())), image.version, commit)
    with _READ_LOCK:
        held = _READ_HANDLES.get(key)
        if held is not None:
            _READ_HANDLES.move_to_end(key)
            return held
    opened = open_pinned(store, image)
    with _READ_LOCK:
        held = _READ_HANDLES.setdefault(key, opened)  # another thread may have kept one meanwhile
        _SHARED.add(held)
        while len(_READ_HANDLES) > READ_HANDLES:
            _READ_HANDLES.popitem(last=False)
    return held
