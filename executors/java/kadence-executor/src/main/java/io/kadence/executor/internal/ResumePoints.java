package io.kadence.executor.internal;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the trigger consumer starts a partition it has just been assigned (PROTOCOL.md section
 * 7, "Resuming on tansu"; the Rust SDK's {@code kadence_kafka::resume}, the same rule).
 *
 * <p>Apache Kafka serves a fetch from the record batch that holds its offset, and the client
 * drops the records before it, so a member resumes exactly at the group's committed offset.
 * tansu 0.6 serves such a fetch from the <em>next</em> batch; the commit rule often puts the
 * committed offset inside a batch. So on tansu each assigned partition with a committed offset
 * is started up to {@value #REWIND} records before it (never before the log start), and
 * {@link #admits} drops what arrives below it. On Kafka (the default) it does neither: the
 * re-read would cost up to {@value #REWIND} records per partition at every assignment.
 * Used on the consumer's thread only.
 */
final class ResumePoints {
    private static final Logger LOG = LoggerFactory.getLogger(ResumePoints.class);
    /** More than a batch holds: a batch is at most 1 MB and triggers are a few hundred bytes. */
    static final long REWIND = 10_000;

    private final boolean enabled;
    private final Map<Integer, Long> pending = new HashMap<>();

    ResumePoints(boolean tansu) {
        this.enabled = tansu;
    }

    /** From the assignment callback: seeks the {@code assigned} partitions before their
     * committed offsets (tansu only). */
    void assigned(Consumer<?, ?> consumer, Collection<TopicPartition> assigned) {
        if (!enabled || assigned.isEmpty()) {
            return;
        }
        try {
            Set<TopicPartition> partitions = Set.copyOf(assigned);
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(partitions);
            Map<TopicPartition, Long> starts = consumer.beginningOffsets(List.copyOf(partitions));
            for (TopicPartition partition : partitions) {
                OffsetAndMetadata offset = committed.get(partition);
                if (offset == null) {
                    continue; // no committed offset: auto.offset.reset starts at an end
                }
                long start = Math.max(starts.getOrDefault(partition, 0L), offset.offset() - REWIND);
                if (start < offset.offset()) {
                    consumer.seek(partition, start);
                    pending.put(partition.partition(), offset.offset());
                }
            }
        } catch (RuntimeException error) {
            LOG.warn("cannot read the group's offsets to start before them (tansu); a committed offset inside "
                    + "a record batch may skip the rest of it: {}", error.toString());
        }
    }

    /** Whether the record at {@code offset} is the executor's to take: not one read again
     * before the partition's committed offset. */
    boolean admits(int partition, long offset) {
        if (!enabled) {
            return true;
        }
        Long resume = pending.get(partition);
        if (resume == null) {
            return true;
        }
        if (offset < resume) {
            return false;
        }
        pending.remove(partition);
        return true;
    }

    /** Revoked or lost partitions: whoever is assigned them next resumes afresh. */
    void forget(Collection<Integer> partitions) {
        partitions.forEach(pending::remove);
    }

    static Set<Integer> ids(Collection<TopicPartition> partitions, String topic) {
        return partitions.stream().filter(p -> p.topic().equals(topic)).map(TopicPartition::partition)
                .collect(Collectors.toSet());
    }
}
