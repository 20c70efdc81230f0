package io.kadence.executor.internal;

import io.kadence.executor.wire.Codec;
import io.kadence.executor.wire.CodecException;
import io.kadence.executor.wire.Records.ControlRecord;
import io.kadence.executor.wire.VerifyException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The control topic (PROTOCOL.md section 5): {@code {p}.control}, partition 0, read on a thread
 * of its own, without a consumer group (assigned, never committed), from its beginning. It
 * forwards this app's commands requested within the kill memory, and counts down
 * {@link #caughtUp()} once it has read up to the end offset it found at start, so the executor
 * takes no trigger before a KILL sent while no executor was up is known. If that end cannot be
 * learnt or reached within the session timeout it says so (logged) and counts down anyway. A
 * record that fails verification, is empty or does not decode is logged, counted and skipped.
 */
public final class ControlReader implements Runnable {
    private static final Logger LOG = LoggerFactory.getLogger(ControlReader.class);

    private final Settings settings;
    private final Metrics metrics;
    private final Consumer<ControlRecord> commands;
    private final CountDownLatch caughtUp = new CountDownLatch(1);
    private final KafkaConsumer<byte[], byte[]> consumer;
    private volatile boolean stopped;

    public ControlReader(Settings settings, Metrics metrics, Consumer<ControlRecord> commands) {
        this.settings = settings;
        this.metrics = metrics;
        this.commands = commands;
        Properties config = settings.clientConfig();
        config.put("enable.auto.commit", "false");
        config.put("auto.offset.reset", "earliest");
        config.put("client.id", "kadence-control-" + settings.executorId());
        this.consumer = new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    public CountDownLatch caughtUp() {
        return caughtUp;
    }

    @Override
    public void run() {
        TopicPartition partition = new TopicPartition(settings.controlTopic(), 0);
        long patienceEnds = System.nanoTime() + settings.sessionTimeout().toNanos();
        try {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            Long end = endOffset(partition);
            if (end != null && end <= 0) {
                caughtUp.countDown();
            }
            while (!stopped) {
                if (caughtUp.getCount() > 0 && System.nanoTime() >= patienceEnds) {
                    LOG.warn("control commands not read to their end within the session timeout; taking triggers");
                    caughtUp.countDown();
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    forward(record);
                    if (end != null && record.offset() + 1 >= end) {
                        caughtUp.countDown();
                    }
                }
                if (end != null && caughtUp.getCount() > 0 && consumer.position(partition) >= end) {
                    caughtUp.countDown();
                }
            }
        } catch (WakeupException stopping) {
            // stop() woke the poll
        } catch (RuntimeException error) {
            LOG.error("the control reader stopped: {}", error.toString());
            caughtUp.countDown();
        } finally {
            consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(5)));
        }
    }

    private Long endOffset(TopicPartition partition) {
        try {
            Map<TopicPartition, Long> ends = consumer.endOffsets(List.of(partition), settings.sessionTimeout());
            return ends.get(partition);
        } catch (RuntimeException error) {
            LOG.warn("cannot learn the end of the control topic: {}", error.toString());
            return null;
        }
    }

    private void forward(ConsumerRecord<byte[], byte[]> record) {
        if (!settings.trustedKeys().isEmpty()) {
            try {
                settings.trustedKeys().verify(settings.controlTopic(), record.partition(), record.value(),
                        record.headers());
            } catch (VerifyException refused) {
                metrics.controlRefused(refused.kind()).increment();
                LOG.warn("ignoring a control record that fails verification: {}", refused.getMessage());
                return;
            }
        }
        if (record.value() == null) {
            metrics.controlRefused("no_value").increment();
            LOG.warn("skipping an empty control record at offset {}", record.offset());
            return;
        }
        ControlRecord command;
        try {
            command = Codec.decodeControl(record.value());
        } catch (CodecException error) {
            metrics.controlRefused("undecodable").increment();
            LOG.warn("skipping an unreadable control record: {}", error.getMessage());
            return;
        }
        long oldest = System.currentTimeMillis() - settings.killMemory().toMillis();
        if (command.app().equals(settings.app()) && command.requestedAtMs() >= oldest) {
            commands.accept(command);
        }
    }

    /** Stops reading (from any thread). */
    public void stop() {
        stopped = true;
        consumer.wakeup();
    }
}
