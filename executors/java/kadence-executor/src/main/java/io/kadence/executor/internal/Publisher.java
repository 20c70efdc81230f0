package io.kadence.executor.internal;

import io.kadence.executor.wire.Codec;
import io.kadence.executor.wire.ExecutorKey;
import io.kadence.executor.wire.Records.ExecutorBeat;
import io.kadence.executor.wire.Records.LogRecord;
import io.kadence.executor.wire.Records.ResultRecord;
import io.kadence.executor.wire.Traceparent;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Everything the executor writes (PROTOCOL.md sections 6, 8 and 9), through one idempotent
 * producer ({@code acks=all}): results (a shadow's to {@code {p}.shadow-results}), log records,
 * dead letters and beats.
 *
 * <p>Results, log records and dead letters wait for the broker's acknowledgement (the client
 * retries retriable errors until {@code delivery.timeout.ms}), because a trigger's offset is
 * committed only once its answer is out; a send that fails after them returns false and the
 * caller leaves the offset uncommitted. Beats do not wait: the next one carries the same news.
 *
 * <p>Every record leaves through {@link #send}, which signs it with the executor key over the
 * topic it goes to, so no kind of record can leave unsigned while a key is set. Headers a
 * record brings along that the executor's own replace are dropped first.
 */
public final class Publisher implements AutoCloseable {
    public static final String DLQ_REASON = "kadence.dlq.reason";
    public static final String DLQ_TOPIC = "kadence.dlq.topic";
    public static final String DLQ_PARTITION = "kadence.dlq.partition";
    public static final String DLQ_OFFSET = "kadence.dlq.offset";
    private static final Logger LOG = LoggerFactory.getLogger(Publisher.class);

    private final KafkaProducer<byte[], byte[]> producer;
    private final ExecutorKey executorKey;
    private final String resultsTopic;
    private final String logsTopic;
    private final String beatsTopic;
    private final String dlqTopic;

    /** How long a log record may wait for the broker's acknowledgement (30 s). */
    public static final Duration LOG_DELIVERY_TIMEOUT = Duration.ofSeconds(30);

    public Publisher(Properties clientConfig, String prefix, boolean shadow, ExecutorKey executorKey) {
        Properties config = new Properties();
        config.putAll(clientConfig);
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "2");
        this.producer = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        this.executorKey = executorKey;
        this.resultsTopic = prefix + (shadow ? ".shadow-results" : ".results");
        this.logsTopic = prefix + ".logs";
        this.beatsTopic = prefix + ".beats";
        this.dlqTopic = prefix + ".dlq";
    }

    /** Publishes a result with its trace context; true once the broker acknowledged it. */
    public boolean result(ResultRecord result, String traceparent, BooleanSupplier giveUp) {
        List<Header> headers = new ArrayList<>();
        if (traceparent != null) {
            headers.add(new RecordHeader(Traceparent.HEADER, traceparent.getBytes(StandardCharsets.US_ASCII)));
        }
        return await(send(resultsTopic, utf8(result.triggerId()), Codec.encode(result), headers), resultsTopic, giveUp);
    }

    /**
     * Publishes a log record; true once the broker acknowledged it. A record the broker has not
     * acknowledged within {@link #LOG_DELIVERY_TIMEOUT} counts as lost (false): a run's result
     * waits for its log records, and is never held back longer than the Rust SDK's producer
     * holds it (its {@code delivery.timeout.ms}). The Java client's own delivery timeout (120 s)
     * is left alone: results and dead letters keep it.
     */
    public boolean log(LogRecord log, BooleanSupplier giveUp) {
        long deadline = System.nanoTime() + LOG_DELIVERY_TIMEOUT.toNanos();
        return await(send(logsTopic, utf8(log.triggerId()), Codec.encode(log), List.of()), logsTopic,
                () -> giveUp.getAsBoolean() || System.nanoTime() >= deadline);
    }

    /**
     * Sends a trigger record that cannot be taken to the DLQ: its key and bytes, every header it
     * had in order (but {@code kadence.dlq.*} and the executor signature headers), then the four
     * {@code kadence.dlq.*} headers and last the executor's own signature.
     */
    public boolean deadLetter(ConsumerRecord<byte[], byte[]> record, String reason, BooleanSupplier giveUp) {
        List<Header> headers = new ArrayList<>();
        for (Header header : record.headers()) {
            String key = header.key();
            if (!key.startsWith("kadence.dlq.") && !key.equals(ExecutorKey.KEY_HEADER)
                    && !key.equals(ExecutorKey.SIGNATURE_HEADER)) {
                headers.add(header);
            }
        }
        headers.add(new RecordHeader(DLQ_REASON, utf8(reason)));
        headers.add(new RecordHeader(DLQ_TOPIC, utf8(record.topic())));
        headers.add(new RecordHeader(DLQ_PARTITION, utf8(Integer.toString(record.partition()))));
        headers.add(new RecordHeader(DLQ_OFFSET, utf8(Long.toString(record.offset()))));
        return await(send(dlqTopic, record.key(), record.value(), headers), dlqTopic, giveUp);
    }

    /** Sends a beat without waiting for it. */
    public void beat(ExecutorBeat beat) {
        try {
            send(beatsTopic, utf8(beat.executorId()), Codec.encode(beat), List.of());
        } catch (RuntimeException error) {
            LOG.warn("cannot send a beat: {}", error.toString());
        }
    }

    /** The one way a record leaves: signed (when there is a key) over {@code topic} and {@code value}. */
    private Future<RecordMetadata> send(String topic, byte[] key, byte[] value, List<Header> headers) {
        List<Header> all = new ArrayList<>(headers.size() + 2);
        for (Header header : headers) {
            if (executorKey == null || !(header.key().equals(ExecutorKey.KEY_HEADER)
                    || header.key().equals(ExecutorKey.SIGNATURE_HEADER))) {
                all.add(header);
            }
        }
        if (executorKey != null) {
            all.add(new RecordHeader(ExecutorKey.KEY_HEADER, utf8(executorKey.keyId())));
            all.add(new RecordHeader(ExecutorKey.SIGNATURE_HEADER, utf8(executorKey.sign(topic, value))));
        }
        return producer.send(new ProducerRecord<>(topic, null, key, value, all));
    }

    private static boolean await(Future<RecordMetadata> sent, String topic, BooleanSupplier giveUp) {
        while (true) {
            try {
                sent.get(50, TimeUnit.MILLISECONDS);
                return true;
            } catch (TimeoutException waiting) {
                if (giveUp.getAsBoolean()) {
                    return false;
                }
            } catch (ExecutionException failed) {
                LOG.error("cannot publish to {} after the client's retries: {}", topic, failed.getCause().toString());
                return false;
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
    }

    /**
     * Publishes the client retried so far, by metric label ({@code results}, {@code logs},
     * {@code dlq}): the producer retries retriable errors itself, and counts them per topic.
     */
    public Map<String, Double> retries() {
        // Log records are not counted: one that does not get through is dropped and counted in
        // kadence_executor_log_records_dropped_total instead (as the Rust SDK counts them).
        Map<String, String> topics = Map.of(resultsTopic, "results", dlqTopic, "dlq");
        Map<String, Double> retries = new HashMap<>();
        producer.metrics().forEach((name, metric) -> {
            String topic = name.tags().get("topic");
            String label = topic == null ? null : topics.get(topic);
            if (label != null && name.group().equals("producer-topic-metrics") && name.name().equals("record-retry-total")
                    && metric.metricValue() instanceof Double value) {
                retries.merge(label, value, Double::sum);
            }
        });
        return retries;
    }

    private static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** Delivers what is queued (the last beat) within {@code timeout}, then closes. */
    @Override
    public void close() {
        producer.close(Duration.ofSeconds(10));
    }
}
