"""Offsets for at-least-once with concurrent runs (PROTOCOL.md section 7).

Triggers of one partition finish out of order, but Kafka keeps one committed offset per
partition meaning "everything before this is done". So a partition's committable offset is
its lowest offset still in flight, or one past the highest received when none is. A crash
then redelivers at most the triggers whose results were not out.
"""


class OffsetTracker:
    """In-flight offsets per partition of the trigger topic."""

    def __init__(self):
        self._partitions = {}  # partition -> [in-flight set, next after seen, committed]

    def track(self, partition, offset):
        state = self._partitions.setdefault(partition, [set(), offset, None])
        state[0].add(offset)
        state[1] = max(state[1], offset + 1)

    def complete(self, partition, offset):
        state = self._partitions.get(partition)
        if state is not None:
            state[0].discard(offset)

    def take_committable(self):
        """(partition, offset) of every partition whose committable offset moved since the
        last call; marks them committed."""
        ready = []
        for partition, state in self._partitions.items():
            offset = min(state[0]) if state[0] else state[1]
            if offset != state[2]:
                state[2] = offset
                ready.append((partition, offset))
        return ready

    def release(self, partitions):
        """Forgets revoked `partitions`; returns their committable offsets not yet committed."""
        ready = []
        for partition in partitions:
            state = self._partitions.pop(partition, None)
            if state is None:
                continue
            offset = min(state[0]) if state[0] else state[1]
            if offset != state[2]:
                ready.append((partition, offset))
        return ready
