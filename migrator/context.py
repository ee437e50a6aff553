"""The state one running migration carries: store, manifest, ledger, identity, progress."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from omnigraph.claims.claim import inspect
from omnigraph.claims.document import ClaimDocument
from omnigraph.claims.errors import claim_held
from omnigraph.engine.manifest.manifest import Manifest
from omnigraph.engine.progress import Progress
from omnigraph.engine.storage.store import GraphStore
from omnigraph.ledger.ledger import Ledger
from omnigraph.migrator.executors import ImageExecutor, LocalExecutor
from omnigraph.migrator.layout import CLAIM_PATH


@dataclass
class Migration:
    """A migration this process holds the claim of; ``executor`` validates its images; ``claim``
    is the claim document it acts under."""

    store: GraphStore
    manifest: Manifest
    ledger: Ledger
    migration_id: str
    token: str
    progress: Progress
    claim: ClaimDocument
    executor: ImageExecutor = field(default_factory=LocalExecutor)
    _appending: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, record_type: type[Any], **fields: Any) -> int:
        """Append a ledger record of ``record_type`` carrying this migration's token and id; one
        append at a time (units in flight at once share the ledger's one sequence)."""
        record = record_type(token=self.token, migration_id=self.migration_id, **fields)
        with self._appending:
            return self.ledger.append(record)

    def require_claim(self) -> None:
        """``claim_held`` unless the claim still carries this migration's token: checked before
        each unit and before the stamp, so a migration whose claim was broken or replaced stops."""
        holder = inspect(self.store, CLAIM_PATH)
        if holder is None or holder.token != self.token:
            raise claim_held(
                f"the migration claim of {self.store.uri} no longer carries this migration's token; stopping before any further effect",
                holder,
                path=CLAIM_PATH,
            )
