"""Storage: the graph root on object storage and the Lance datasets under it.

:mod:`~omnigraph.engine.storage.store` is the object store (one URI, local or S3, with the atomic
create-if-absent primitive) and the canonical JSON byte encoding of every persisted document;
:mod:`~omnigraph.engine.storage.lance_io` opens Lance datasets at a (branch, version), names one pinned
table image (:class:`~omnigraph.engine.storage.lance_io.ImageRef`) and opens it
(:func:`~omnigraph.engine.storage.lance_io.open_pinned`), and lists, forks and deletes Lance branches;
:mod:`~omnigraph.engine.storage.names` holds every root-relative name used in several places and the
format stamp values; :mod:`~omnigraph.engine.storage.blobs` reads the payloads of stored Blob cells and
the external objects Blob URIs name; :mod:`~omnigraph.engine.storage.process` tells whether the
processes those documents name (host, pid, start time) are still running.

Nothing here writes table rows, and nothing here imports another engine sub-package but
:mod:`omnigraph.engine.errors`. The package itself defines no names: callers import them from the
module that defines them.
"""
