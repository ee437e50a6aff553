"""omnigraph engine: the fenced embedded graph engine over Lance datasets (format 5).

Sub-packages and top-level modules, lowest layer first (each imports only from layers below it):

* :mod:`~omnigraph.engine.errors` (the one exception family, with HTTP statuses and exit codes),
  :mod:`~omnigraph.engine.failpoints` (named crash and stop points for tests),
  :mod:`~omnigraph.engine.lexer` (the scanner both languages share),
  :mod:`~omnigraph.engine.progress` (the progress protocol of long work) and
  :mod:`~omnigraph.engine.results` (the typed results the operations return);
* :mod:`~omnigraph.engine.storage`: the graph root on object storage and the Lance datasets under it;
* :mod:`~omnigraph.engine.schema`: the ``.pg`` schema language and its catalog;
* :mod:`~omnigraph.engine.door` (the only code that writes rows of keyed tables),
  :mod:`~omnigraph.engine.records` (JSONL records, validated) and :mod:`~omnigraph.engine.gq` (the
  ``.gq`` language);
* :mod:`~omnigraph.engine.manifest`: the ``__manifest`` catalog dataset, graph branches and the
  commit history;
* :mod:`~omnigraph.engine.reconcile`: interrupted and out-of-band commits;
* :mod:`~omnigraph.engine.access`: who may write a graph now;
* :mod:`~omnigraph.engine.graph`: opening and creating graph roots;
* :mod:`~omnigraph.engine.ops` (one module per operation), :mod:`~omnigraph.engine.maintenance`
  (optimize and the integrity check) and :mod:`~omnigraph.engine.query` (read queries).

Packages define no names in their ``__init__``: callers import each name from the module that
defines it.
"""

__version__ = "0.1.0"
