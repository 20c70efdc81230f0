package io.kadence.executor.internal;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The ids of the triggers taken here recently (PROTOCOL.md section 4, step 3): a trigger whose
 * id is known is a redelivery and is not run again. The oldest is forgotten first past
 * {@code capacity} (10 000 in both reference SDKs); a trigger that did not run to a result here
 * (handed back, its partition lost, its result not published) is forgotten at once.
 */
public final class RecentTriggers {
    private final int capacity;
    private final LinkedHashMap<String, Boolean> ids;

    public RecentTriggers(int capacity) {
        this.capacity = capacity;
        this.ids = new LinkedHashMap<>(16, 0.75f, false) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
                return size() > RecentTriggers.this.capacity;
            }
        };
    }

    /** Remembers {@code triggerId}; false if it was known already (a redelivery). */
    public synchronized boolean insert(String triggerId) {
        return ids.putIfAbsent(triggerId, Boolean.TRUE) == null;
    }

    public synchronized void forget(String triggerId) {
        ids.remove(triggerId);
    }

    public synchronized int size() {
        return ids.size();
    }
}
