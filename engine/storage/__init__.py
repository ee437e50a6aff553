"""Storage: the graph root on object storage and the Lance datasets under it.

:mod:`~omnigraph.engine.storage.store` is the object store (one URI, local or S3, with the atomic
create-if-absent primitive), :mod:`~omnigraph.engine.storage.lance_io` names one pinned table image (:class:`ImageRef`) and opens it
(:func:`open_pinned`), :mod:`~omnigraph.engine.storage.lance_io` opens Lance datasets at a (branch,
version) and lists, forks and deletes Lance branches, :mod:`~omnigraph.engine.storage.names` holds every
root-relative name used in several places, :mod:`~omnigraph.engine.storage.names` the format stamp values,
:mod:`~omnigraph.engine.storage.store` the byte encoding of every persisted JSON document and
:mod:`~omnigraph.engine.storage.process` the liveness of the processes those documents name (host, pid,
start time).
Nothing here writes table rows, and nothing here imports another engine sub-package but
:mod:`omnigraph.engine.errors`.
"""
