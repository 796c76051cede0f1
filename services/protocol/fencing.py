"""What the fence answers of one recovery established (docs/protocol.md, "Fencing and
recovery", steps 2-3): which bookie answered under which instance, their LACs, the
ledger's length where an answer gave it, and the bookies whose fence failed.

A bookie counts as fenced only under the instance that answered its fence: the first
answer wins (a repeated one is ignored), and a bookie reformatted since is a new,
unfenced instance (``readforward.ReadForward`` applies that to every read answer).

Across runs: the last fragment records the instance each bookie had when it was
chosen (``metadata.Fragment.instances``). A fence answered by another instance
(or by one that names none) comes from a "replaced instance": a bookie that lost
what the fragment put on it (reformatted before this fence, or between two
recovery attempts). It IS fenced: the old writer's adds to it are refused from now
on, so it counts toward the coverage of step 3, which is about stopping the writer.
It knows nothing of the entries before it, though: ``replaced`` names it, and the
read-forward never counts its "missing" toward absence. An unknown recorded
instance (metadata older than instances) is not compared: as before.
"""

from __future__ import annotations

from services.protocol import quorum
from services.protocol.messages import FenceDone
from services.protocol.metadata import LedgerMetadata


class FenceLengths:
    """The ledger's length at some entries, as the fence answers gave it (a bookie's
    length at its LAC and at its last entry). Two answers that disagree make it
    unknown there (the entry is read then)."""

    def __init__(self) -> None:
        self._known: dict[int, int] = {-1: 0}
        self._conflicts: set[int] = set()

    def learn(self, entry_id: int, length: int) -> None:
        if entry_id < 0 or length < 0 or entry_id in self._conflicts:
            return
        if self._known.get(entry_id, length) != length:
            self._conflicts.add(entry_id)
            del self._known[entry_id]
            return
        self._known[entry_id] = length

    def get(self, entry_id: int) -> int | None:
        return self._known.get(entry_id)


class FenceAnswers:
    """The fence answers of one recovery of ``metadata``'s last fragment."""

    def __init__(self, metadata: LedgerMetadata) -> None:
        self.metadata = metadata
        self.lacs: dict[str, int] = {}
        self.instances: dict[str, str | None] = {}  # who answered the fence
        # Answered under another instance than the last fragment recorded: fenced, but
        # knows nothing of what was written before (see the module docstring).
        self.replaced: set[str] = set()
        self.lengths = FenceLengths()
        self.failures: set[str] = set()

    def answered(self, event: FenceDone) -> bool:
        """Take an answer; False for a repeated one (the first instance is the fenced one)."""
        if event.bookie in self.lacs:
            return False
        self.lacs[event.bookie] = event.lac
        self.instances[event.bookie] = event.instance_id
        recorded = self.metadata.last_fragment.instance_of(event.bookie)
        if recorded is not None and event.instance_id != recorded:
            self.replaced.add(event.bookie)
        self.failures.discard(event.bookie)
        self.lengths.learn(event.lac, event.lac_length)
        self.lengths.learn(event.last_entry_id, event.length)
        return True

    def failed(self, bookie: str) -> None:
        if bookie not in self.lacs:
            self.failures.add(bookie)

    def covered(self) -> bool:
        """True once, for every write set, ``Qw - Qa + 1`` of its bookies answered (replaced
        instances included: they are fenced; what they cannot tell, the read-forward
        waits for or fails on)."""
        md = self.metadata
        answered = [i for i, b in enumerate(md.ensemble) if b in self.lacs]
        return quorum.fencing_complete(md.ensemble_size, md.write_quorum, md.ack_quorum, answered)

    def failure(self) -> str | None:
        """Why fencing cannot complete, once every bookie answered or failed without the
        coverage; None while it still can."""
        md = self.metadata
        if len(self.failures) + len(self.lacs) < md.ensemble_size:
            return None
        return (
            f"only {sorted(self.lacs)} of {list(md.ensemble)} answered the fence; "
            f"every write set needs {quorum.fence_threshold(md.write_quorum, md.ack_quorum)}"
        )

    def awaited(self) -> set[str]:
        """Bookies of the ensemble that neither answered nor failed yet."""
        return {b for b in self.metadata.ensemble if b not in self.lacs} - self.failures
