"""Graph roots on object storage, and the canonical JSON bytes of every persisted document.

A graph URI is a local path, a ``file://`` URL or ``s3://bucket/prefix``; :func:`open_store` gives
its :class:`GraphStore` and Lance storage options. S3 settings come from the environment
(``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``), overlaid by the storage options the
caller passes to :func:`open_store` (the Python API's ``storage_options``: the names of
:data:`STORAGE_OPTION_ENV`); the store keeps them for every object and dataset it opens.

Paths handed to a :class:`GraphStore` are relative to the graph root and use ``/``.
:meth:`GraphStore.put_if_absent` is the one atomic create-if-absent primitive the toolkit relies
on for recovery intents, claims and ledger records: on a local disk it links a complete,
fsynced temporary file into place with ``link(2)`` (which fails if the name exists), and on S3 it
sends ``If-None-Match: *``. It never checks-then-writes.

A local root's objects are plain files, read and written with the standard library's file calls;
an S3 root's go through s3fs, with transient errors retried. :attr:`GraphStore.fs` gives the
fsspec filesystem of either kind for whole-tree walks (``find``); fsspec is imported only then or
for an S3 root, so a command on a local root does not load it.

:func:`canonical_json` is the one byte encoding of every persisted document (intents, claims,
ledger records): keys sorted at every level, ``separators=(",", ":")``, UTF-8 without ASCII
escaping, no NaN or infinity. Equal values always encode to equal bytes, so a document read back
and re-encoded is byte-identical to what was written.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

import msgspec
from tenacity import retry, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential_jitter

from omnigraph.engine.errors import BadRequest, NotFound, StorageAccessDenied, StorageUnavailable

if TYPE_CHECKING:
    import fsspec
    from pydantic import BaseModel


def canonical_json(value: BaseModel | Any) -> bytes:
    """The canonical UTF-8 JSON bytes of ``value`` (a pydantic model is dumped in JSON mode).

    pydantic is not imported here: a model exists only once pydantic is, so a process that
    encodes plain values (a read-only command) never pays for importing it.
    """
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        value = value.model_dump(mode="json")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


T = TypeVar("T")


def _is_conditional_conflict(error: BaseException) -> bool:
    """S3 answers 409 ConditionalRequestConflict while another conditional PUT is in flight."""
    text = str(error)
    return "ConditionalRequestConflict" in text or "(409)" in text


_TRANSIENT_MARKERS = (
    "InternalError",
    "SlowDown",
    "ServiceUnavailable",
    "(500)",
    "(503)",
    "Internal Server Error",
    "Service Unavailable",
    "Connection",
    "connection",
    "timed out",
    "Timeout",
    "Server disconnected",
)
S3_ATTEMPTS = 4
S3_RETRY_SECONDS = 30.0


def _is_transient(error: BaseException) -> bool:
    """A 5xx answer, throttling, or a dropped/timed-out connection: the request may be retried.

    Missing objects, refused credentials and existing objects are answers, never retried.
    """
    if isinstance(error, (FileNotFoundError, PermissionError, FileExistsError, IsADirectoryError)):
        return False
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    return any(marker in f"{type(error).__name__}: {error}" for marker in _TRANSIENT_MARKERS)


def _s3_io(method: Callable[..., T]) -> Callable[..., T]:
    """Retry ``method`` on transient S3 errors; once the budget is spent, raise ``storage_unavailable``.

    The budget is tenacity's: at most :data:`S3_ATTEMPTS` attempts and :data:`S3_RETRY_SECONDS`,
    exponential backoff with jitter. Local stores are not retried.
    """
    retrying = retry(
        retry=retry_if_exception(_is_transient),
        stop=stop_after_attempt(S3_ATTEMPTS) | stop_after_delay(S3_RETRY_SECONDS),
        wait=wait_exponential_jitter(multiplier=0.1, max=2.0, jitter=0.1),
        reraise=True,
    )(method)

    @functools.wraps(method)
    def wrapper(self: GraphStore, *args: Any, **kwargs: Any) -> T:
        if self.is_local:
            return method(self, *args, **kwargs)
        try:
            return retrying(self, *args, **kwargs)
        except Exception as error:
            if _is_transient(error):
                raise StorageUnavailable(
                    f"{self.uri}: the object store kept failing after {S3_ATTEMPTS} attempts ({type(error).__name__}: "
                    f"{error}); nothing is left half-done by this call, run the command again",
                    {"uri": self.uri},
                ) from error
            raise

    return wrapper


class GraphStore(msgspec.Struct, frozen=True):
    """A graph root: where plain objects and Lance datasets of one graph live (stores of one ``uri`` are equal)."""

    uri: str
    root: str
    storage_options: dict[str, str] | None = None
    s3_fs: fsspec.AbstractFileSystem | None = None
    """The s3fs filesystem of an S3 root; None for a local root."""
    s3_fs_kwargs: dict[str, object] = msgspec.field(default_factory=dict)
    """The s3fs settings the store was opened with (for S3 objects named by Blob cells, too)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphStore) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def __repr__(self) -> str:
        return f"GraphStore(uri={self.uri!r}, root={self.root!r}, storage_options={self.storage_options!r})"

    @property
    def is_local(self) -> bool:
        """True for a local root (a path or ``file://``), False for an ``s3://`` one."""
        return not self.uri.startswith("s3://")

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem the root's paths (:meth:`path`) belong to.

        s3fs for an S3 root; fsspec's local filesystem (imported on first use) for a local one.
        """
        if self.s3_fs is not None:
            return self.s3_fs
        import fsspec

        return fsspec.filesystem("file")

    def path(self, rel: str) -> str:
        """The filesystem path of ``rel`` (relative to the graph root)."""
        rel = rel.strip("/")
        return f"{self.root}/{rel}" if rel else self.root

    def dataset_uri(self, rel: str) -> str:
        """The URI Lance opens for the dataset at ``rel``."""
        rel = rel.strip("/")
        return f"{self.uri}/{rel}"

    def put_if_absent(self, rel: str, data: bytes, *, durable: bool = True) -> bool:
        """Create ``rel`` with ``data`` atomically unless it exists; True if this call created it.

        On a local disk ``durable=False`` skips the ``fsync`` of the file and its directory: for
        records whose loss in an operating-system crash is harmless (a branch lease belongs to
        processes that died with it). An object store's write is always durable.
        """
        if self.is_local:
            return _local_put_if_absent(self.path(rel), data, durable=durable)
        if self._s3_put_if_absent_retried(rel, data):
            return True
        # A retried attempt (ours, or botocore's) may have landed before its answer was lost, so
        # "exists" is not proof of another creator: the object is ours exactly when it holds our
        # bytes (claims, intents and ledger records carry unique tokens and ids). Gone by now:
        # another creator's object, already removed.
        try:
            return self.read_bytes(rel) == data
        except FileNotFoundError:
            return False

    @_s3_io
    def _s3_put_if_absent_retried(self, rel: str, data: bytes) -> bool:
        return self._s3_put_if_absent(rel, data)

    @retry(
        retry=retry_if_exception(_is_conditional_conflict),
        stop=stop_after_attempt(8),
        wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
        reraise=True,
    )
    def _s3_put_if_absent(self, rel: str, data: bytes) -> bool:
        bucket, _, key = self.path(rel).partition("/")
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except FileExistsError:
            return False
        except OSError as error:
            if "PreconditionFailed" in str(error) or "(412)" in str(error):
                return False
            raise
        return True

    @_s3_io
    def read_bytes(self, rel: str) -> bytes:
        """The bytes at ``rel``; ``FileNotFoundError`` if absent.

        On an object store, one GET of whatever version is there (an object replaced while it is
        read is read whole, old or new, never refused as changed).
        """
        if self.is_local:
            with open(self.path(rel), "rb") as handle:
                return handle.read()
        return bytes(self.fs.cat_file(self.path(rel)))

    @_s3_io
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace ``rel`` atomically (only for documents that are not create-if-absent)."""
        if self.is_local:
            target = self.path(rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            staging = f"{os.path.dirname(target)}/.{os.path.basename(target)}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(staging, "wb") as handle:
                handle.write(data)
            os.replace(staging, target)  # a reader sees the old bytes or the new, never a torn file
            return
        with self.fs.open(self.path(rel), "wb") as handle:
            handle.write(data)

    def directory_stamp(self, rel_dir: str) -> int | None:
        """A value that changes whenever an entry of local directory ``rel_dir`` is created, replaced or removed.

        Its modification time in nanoseconds; None on an object store (no such thing) or if the
        directory cannot be read. For cheap waiting: a caller re-reads the directory only when it changed.
        """
        if not self.is_local:
            return None
        try:
            return os.stat(self.path(rel_dir)).st_mtime_ns
        except OSError:
            return None

    @_s3_io
    def exists(self, rel: str) -> bool:
        """True if an object (or a directory) exists at ``rel``."""
        if self.is_local:
            return os.path.exists(self.path(rel))
        return bool(self.fs.exists(self.path(rel)))

    @_s3_io
    def list(self, rel_dir: str) -> list[str]:
        """Sorted names (not paths) of the entries directly under ``rel_dir``; [] if absent."""
        path = self.path(rel_dir)
        if self.is_local:
            try:
                return sorted(os.listdir(path))
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            entries = self.fs.ls(path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        names = {entry.rstrip("/").rsplit("/", 1)[-1] for entry in entries}
        names.discard("")
        return sorted(names)

    @_s3_io
    def delete(self, rel: str) -> None:
        """Remove the object at ``rel``; absent is not an error."""
        try:
            if self.is_local:
                os.remove(self.path(rel))
            else:
                self.fs.rm_file(self.path(rel))
        except FileNotFoundError:
            pass

    @_s3_io
    def delete_tree(self, rel_dir: str) -> None:
        """Remove every object under ``rel_dir``; absent is not an error."""
        try:
            if self.is_local:
                shutil.rmtree(self.path(rel_dir))
            else:
                self.fs.rm(self.path(rel_dir), recursive=True)
        except FileNotFoundError:
            pass

    def is_empty_root(self) -> bool:
        """True if the graph root does not exist or holds nothing."""
        return not self.list("")


def _local_put_if_absent(target: str, data: bytes, *, durable: bool) -> bool:
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{os.path.basename(target)}.tmp-{secrets.token_hex(8)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
        if durable:
            _fsync_directory(directory)
        return True
    finally:
        os.unlink(temp)


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


STORAGE_OPTION_ENV: dict[str, str] = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
    "aws_region": "AWS_REGION",
    "aws_endpoint": "AWS_ENDPOINT_URL",
    "allow_http": "AWS_ALLOW_HTTP",
}
"""The S3 settings a caller may give instead of the environment (Lance's option names), and the
environment variable each one stands for."""


def check_storage_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """``options`` as a plain dict of strings; ``bad_request`` naming an unknown option."""
    checked = {str(key): str(value) for key, value in (options or {}).items()}
    unknown = sorted(set(checked) - set(STORAGE_OPTION_ENV))
    if unknown:
        raise BadRequest(
            f"unknown storage option(s) {unknown}; accepted: {sorted(STORAGE_OPTION_ENV)}",
            {"unknown": unknown, "accepted": sorted(STORAGE_OPTION_ENV)},
        )
    return checked


def _s3_environment(given: Mapping[str, str]) -> dict[str, str]:
    """The AWS settings in effect: the environment, overlaid by the ``given`` storage options."""
    names = (*STORAGE_OPTION_ENV.values(), "AWS_ENDPOINT", "AWS_DEFAULT_REGION")
    values = {name: os.environ[name] for name in names if os.environ.get(name)}
    for option, value in given.items():
        name = STORAGE_OPTION_ENV[option]
        values[name] = value
        values.pop({"AWS_ENDPOINT_URL": "AWS_ENDPOINT", "AWS_REGION": "AWS_DEFAULT_REGION"}.get(name, ""), None)
    return values


def s3_settings(given: Mapping[str, str]) -> tuple[dict[str, object], dict[str, str]]:
    """The s3fs keyword arguments and the Lance storage options, as ``(fs_kwargs, lance_options)``.

    Both are built from the AWS environment, overlaid by the ``given`` storage options (checked by
    :func:`check_storage_options`).
    """
    env = _s3_environment(given)
    endpoint = env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    allow_http = env.get("AWS_ALLOW_HTTP", "").lower() in ("1", "true", "yes")
    # Bounded retry budgets: botocore (3 attempts per call), then GraphStore's tenacity policy
    # (s3fs's own wrapper is set to one attempt in open_store); Lance: 10 retries within 60 s.
    fs_kwargs: dict[str, object] = {
        "use_listings_cache": False,
        "config_kwargs": {"retries": {"max_attempts": 3, "mode": "standard"}, "connect_timeout": 10, "read_timeout": 60},
    }
    client_kwargs: dict[str, object] = {"region_name": region}
    lance_options: dict[str, str] = {"aws_region": region, "client_max_retries": "10", "client_retry_timeout": "60"}
    if endpoint:
        client_kwargs["endpoint_url"] = endpoint
        lance_options["aws_endpoint"] = endpoint
        if endpoint.startswith("http://"):
            allow_http = True
    if allow_http:
        lance_options["allow_http"] = "true"
    for env_name, option in (
        ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        ("AWS_SESSION_TOKEN", "aws_session_token"),
    ):
        value = env.get(env_name)
        if value:
            lance_options[option] = value
    for option, s3fs_name in (("aws_access_key_id", "key"), ("aws_secret_access_key", "secret"), ("aws_session_token", "token")):
        if option in given:  # botocore reads the environment by itself; given keys are passed on
            fs_kwargs[s3fs_name] = given[option]
    fs_kwargs["client_kwargs"] = client_kwargs
    return fs_kwargs, lance_options


_VERIFIED_BUCKETS: set[tuple[str, str]] = set()
"""(bucket, the S3 settings it was checked with) that answered ``head_bucket`` in this process."""


def _require_bucket(fs: fsspec.AbstractFileSystem, bucket: str) -> None:
    """Refuse, with a typed error, a bucket that is missing or that our credentials may not use.

    Called before any command reads or writes under the bucket: a bucket that does not exist is
    ``not_found``, one our credentials may not use ``access_denied``.
    """
    try:
        fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        raise NotFound(f"bucket {bucket!r} does not exist (create it first)", {"bucket": bucket}) from None
    except PermissionError as error:
        raise StorageAccessDenied(
            f"access to bucket {bucket!r} was denied ({error}); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
            {"bucket": bucket},
        ) from None
    except Exception as error:
        if _is_transient(error):
            raise StorageUnavailable(f"bucket {bucket!r} cannot be reached: {error}; run the command again", {"bucket": bucket}) from error
        raise


def open_store(uri: str, storage_options: Mapping[str, str] | None = None) -> GraphStore:
    """The :class:`GraphStore` for a graph URI (local path, ``file://`` or ``s3://``).

    S3 settings come from the environment, overlaid by ``storage_options`` (the names of
    :data:`STORAGE_OPTION_ENV`); the store keeps them for every object and dataset it opens,
    external Blob objects included.

    Raises:
        BadRequest: no URI, an unsupported scheme, a bucket-less S3 URI, a file where the root
            should be, or an unknown storage option.
        NotFound: the bucket does not exist.
    """
    if not uri:
        raise BadRequest("a graph URI is required (a directory path or s3://bucket/prefix)")
    fs_kwargs, lance_options = s3_settings(check_storage_options(storage_options))
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise BadRequest(f"{uri!r} names no bucket; use s3://bucket/prefix")
        import fsspec  # S3 roots only: a command on a local root never loads fsspec

        fs = fsspec.filesystem("s3", **fs_kwargs)
        fs.retries = 1  # one attempt per s3fs call: botocore and GraphStore's tenacity policy retry
        root = f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
        checked = (parsed.netloc, json.dumps(lance_options, sort_keys=True))
        if checked not in _VERIFIED_BUCKETS:  # once per bucket and settings, not per open
            _require_bucket(fs, parsed.netloc)
            _VERIFIED_BUCKETS.add(checked)
        return GraphStore(uri=f"s3://{root}", root=root, storage_options=lance_options, s3_fs=fs, s3_fs_kwargs=fs_kwargs)
    if parsed.scheme in ("file", ""):
        local = parsed.path if parsed.scheme == "file" else uri
        root = os.path.abspath(local).rstrip("/") or "/"
        if os.path.exists(root) and not os.path.isdir(root):
            raise BadRequest(f"{root} is a file, not a graph root (a directory)", {"uri": root})
        return GraphStore(uri=root, root=root, s3_fs_kwargs=fs_kwargs)
    raise BadRequest(f"unsupported graph URI scheme {parsed.scheme!r}; use a path, file:// or s3://")


def copy_root(source: GraphStore, destination: GraphStore) -> list[tuple[str, int]]:
    """Copy every object under ``source`` to ``destination`` (which must be empty).

    The copy holds every branch and version. It is a rehearsal copy, not a backup: Lance branch
    manifests address their parent's data files by the source root's URI, so the copy's
    branches keep reading (never writing) those files from the source, which must stay in place
    and readable while the copy is used. The source is only read. Returns the copied
    (relative path, size) pairs, sorted.
    """
    if not destination.is_empty_root():
        raise BadRequest(f"{destination.uri} is not empty; copy needs an empty destination", {"uri": destination.uri})
    copied: list[tuple[str, int]] = []
    for path, info in sorted(source.fs.find(source.root, detail=True, withdirs=False).items()):
        rel = path[len(source.root) :].lstrip("/") if path.startswith(source.root) else path
        with source.fs.open(path, "rb") as handle:
            data = handle.read()
        destination.write_bytes(rel, data)
        copied.append((rel, int(info.get("size", len(data)))))
    return copied
