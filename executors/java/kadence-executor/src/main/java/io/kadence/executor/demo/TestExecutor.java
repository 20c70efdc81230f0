package io.kadence.executor.demo;

import io.kadence.executor.BrokerKind;
import io.kadence.executor.Executor;
import io.kadence.executor.ExecutorBuilder;
import io.kadence.executor.ExecutorConfigException;
import io.kadence.executor.GroupProtocol;
import io.kadence.executor.JobContext;
import io.kadence.executor.JobFailedException;
import io.kadence.executor.KadenceJob;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The Java executor process of the conformance suite, with exactly the interface of the Rust
 * {@code test-executor} ({@code tests/src/bin/test-executor.rs}) and the Python demo:
 *
 * <ul>
 *   <li>Handlers: {@code ok} succeeds; {@code sleep} (params: ms) writes the line {@code
 *       sleeping {ms} ms on {executor id}}, then waits that long or until cancelled, then fails
 *       with {@code stopped early}; {@code fail} fails with its params as the message ({@code
 *       failed on purpose} when empty); {@code log} (params: {@code n} or {@code n:bytes}) writes
 *       the lines {@code line 1} … {@code line n}, or with {@code bytes} each line {@code line
 *       {i} } padded with {@code x} to {@code bytes} bytes; {@code shard} writes {@code shard {index} of
 *       {total}}; {@code noop} succeeds at once and prints nothing; {@code work} (params:
 *       {@code ms:n}) writes {@code n} lines and works {@code ms} after the first, printing
 *       nothing (the benchmark's handler of a sustained run); {@code describe} writes
 *       {@code describing} and fails with {@code {production|shadow} run of a {trigger type}
 *       trigger}.
 *   <li>Standard output: {@code ready} once built, {@code started <trigger id>} as every run
 *       begins, {@code owns <partitions>} (ascending, comma separated, {@code none}) whenever the
 *       group assigns or revokes partitions.
 *   <li>SIGTERM and SIGINT stop it gracefully (the SDK's shutdown hook); it exits 0 after.
 * </ul>
 *
 * Environment: {@code KADENCE_BROKERS}, {@code KADENCE_APP}, {@code KADENCE_TOPIC_PREFIX},
 * {@code KADENCE_EXECUTOR_ID}; optional {@code KADENCE_SESSION_TIMEOUT_MS} (6000),
 * {@code KADENCE_REBALANCE_TIMEOUT_MS} (the hand-back wait, half the session timeout),
 * {@code KADENCE_BEAT_INTERVAL_MS} (3000), {@code KADENCE_DRAIN_TIMEOUT_MS} (30000),
 * {@code KADENCE_SCRIPTS} (1 or true: run script jobs, which needs a trusted key),
 * {@code KADENCE_SCRIPT_DIR} (where their files go), {@code KADENCE_TRUSTED_KEYS} (comma separated;
 * required unless {@code KADENCE_ALLOW_UNVERIFIED} is 1 or true), {@code KADENCE_EXECUTOR_KEY}
 * (required unless {@code KADENCE_ALLOW_UNSIGNED} is 1 or true), {@code KADENCE_SHADOW},
 * {@code KADENCE_GROUP_PROTOCOL} (classic, the default, or consumer), {@code KADENCE_BROKER_KIND}
 * (kafka, the default, or tansu) and {@code KADENCE_METRICS_ADDRESS} (host:port).
 * {@code KADENCE_OTLP_ENDPOINT} is accepted and ignored: this SDK exports no spans.
 */
public final class TestExecutor {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    private TestExecutor() {}

    /** The handlers, as annotated methods of one bean (the way Spring applications register). */
    public static final class Handlers {
        private static void announce(JobContext ctx) {
            OUT.println("started " + ctx.triggerId());
        }

        @KadenceJob("ok")
        public void ok(JobContext ctx) {
            announce(ctx);
        }

        @KadenceJob("noop")
        public void noop() {}

        @KadenceJob("sleep")
        public void sleep(JobContext ctx) throws JobFailedException {
            announce(ctx);
            long millis = Long.parseLong(ctx.params().strip());
            // Tells two runs of one trigger apart when they ran on different executors.
            ctx.log("sleeping {} ms on {}", millis, System.getenv("KADENCE_EXECUTOR_ID"));
            try {
                Thread.sleep(millis);
            } catch (InterruptedException cancelled) {
                throw new JobFailedException("stopped early");
            }
        }

        @KadenceJob("fail")
        public void fail(JobContext ctx) throws JobFailedException {
            announce(ctx);
            throw new JobFailedException(ctx.params().isEmpty() ? "failed on purpose" : ctx.params());
        }

        @KadenceJob("log")
        public void log(JobContext ctx) {
            announce(ctx);
            String params = ctx.params().strip();
            int colon = params.indexOf(':');
            int lines = Integer.parseInt(colon < 0 ? params : params.substring(0, colon));
            int bytes = colon < 0 ? -1 : Integer.parseInt(params.substring(colon + 1));
            for (int line = 1; line <= lines; line++) {
                ctx.log(bytes < 0 ? "line " + line : padded("line " + line + " ", bytes));
            }
        }

        /** {@code text} padded with {@code x} to {@code bytes} characters (ASCII: bytes). */
        private static String padded(String text, int bytes) {
            return text.length() >= bytes ? text : text + "x".repeat(bytes - text.length());
        }

        /**
         * Works {@code ms} (params {@code ms:n}) and writes {@code n} log lines, the first at its
         * start, as an application's handler does; prints nothing (the end-to-end benchmark's
         * handler of a sustained run).
         */
        @KadenceJob("work")
        public void work(JobContext ctx) throws JobFailedException {
            String params = ctx.params().strip();
            int colon = params.indexOf(':');
            if (colon < 0) {
                throw new JobFailedException("params: SLEEP_MS:LINES");
            }
            long millis = Long.parseLong(params.substring(0, colon));
            int lines = Integer.parseInt(params.substring(colon + 1));
            if (lines > 0) {
                ctx.log("working, line {} of {}", 1, lines);
            }
            try {
                Thread.sleep(millis);
            } catch (InterruptedException cancelled) {
                throw new JobFailedException("stopped early");
            }
            for (int line = 2; line <= lines; line++) {
                ctx.log("working, line {} of {}", line, lines);
            }
        }

        @KadenceJob("shard")
        public void shard(JobContext ctx) {
            announce(ctx);
            ctx.log("shard {} of {}", ctx.shardIndex(), ctx.shardTotal());
        }

        @KadenceJob("describe")
        public void describe(JobContext ctx) throws JobFailedException {
            announce(ctx);
            ctx.log("describing");
            String executor = ctx.isShadow() ? "shadow" : "production";
            throw new JobFailedException(executor + " run of a " + ctx.triggerType() + " trigger");
        }
    }

    public static void main(String[] args) {
        // slf4j-simple to standard error, warnings and errors only (as the Rust test executor
        // runs with RUST_LOG=warn) unless the command line says otherwise.
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        Executor executor;
        try {
            executor = fromEnvironment().handlers(new Handlers()).build();
        } catch (ExecutorConfigException | IllegalArgumentException refused) {
            System.err.println("the executor refuses to start: " + refused.getMessage());
            System.exit(2);
            return;
        }
        executor.onPartitions(TestExecutor::announcePartitions);
        // After SIGTERM the JVM is shutting down, and would exit 143 as soon as the SDK's hook
        // returned (racing the end of main). This hook waits for the graceful stop to finish,
        // then ends the process with 0: the stop was graceful. The JVM waits for every hook.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                executor.awaitTermination(Duration.ofSeconds(90));
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
            OUT.flush();
            Runtime.getRuntime().halt(0);
        }, "test-executor-exit"));
        OUT.println("ready");
        try {
            executor.run();
        } catch (RuntimeException failed) {
            System.err.println("the executor failed: " + failed);
            OUT.flush();
            Runtime.getRuntime().halt(1);
        }
        OUT.flush();
        Runtime.getRuntime().halt(0);
    }

    private static void announcePartitions(List<Integer> owned) {
        String list = owned.isEmpty() ? "none" : owned.stream().map(String::valueOf).collect(Collectors.joining(","));
        OUT.println("owns " + list);
    }

    private static ExecutorBuilder fromEnvironment() {
        long sessionMs = millis("KADENCE_SESSION_TIMEOUT_MS", 6_000);
        ExecutorBuilder builder = Executor.builder()
                .brokers(required("KADENCE_BROKERS"))
                .app(required("KADENCE_APP"))
                .topicPrefix(required("KADENCE_TOPIC_PREFIX"))
                .executorId(required("KADENCE_EXECUTOR_ID"))
                .sessionTimeout(Duration.ofMillis(sessionMs))
                .handBackWait(Duration.ofMillis(millis("KADENCE_REBALANCE_TIMEOUT_MS", sessionMs / 2)))
                .beatInterval(Duration.ofMillis(millis("KADENCE_BEAT_INTERVAL_MS", 3_000)))
                .drainTimeout(Duration.ofMillis(millis("KADENCE_DRAIN_TIMEOUT_MS", 30_000)))
                .shadow(flag("KADENCE_SHADOW"))
                .groupProtocol(GroupProtocol.parse(orDefault("KADENCE_GROUP_PROTOCOL", "classic")))
                .brokerKind(BrokerKind.parse(orDefault("KADENCE_BROKER_KIND", "kafka")));
        for (String key : orDefault("KADENCE_TRUSTED_KEYS", "").split(",")) {
            if (!key.isBlank()) {
                builder.trustedKey(key.strip());
            }
        }
        if (flag("KADENCE_ALLOW_UNVERIFIED")) {
            builder.allowUnverified();
        }
        String key = orDefault("KADENCE_EXECUTOR_KEY", "").strip();
        if (!key.isEmpty()) {
            builder.executorKey(key);
        }
        if (flag("KADENCE_ALLOW_UNSIGNED")) {
            builder.allowUnsigned();
        }
        if (flag("KADENCE_SCRIPTS")) {
            builder.scripts(true);
        }
        String scriptDir = System.getenv("KADENCE_SCRIPT_DIR");
        if (scriptDir != null && !scriptDir.isBlank()) {
            builder.scriptDir(java.nio.file.Path.of(scriptDir.strip()));
        }
        String metrics = System.getenv("KADENCE_METRICS_ADDRESS");
        if (metrics != null && !metrics.isBlank()) {
            builder.metricsAddress(metrics.strip());
        }
        return builder;
    }

    private static String required(String name) {
        String value = System.getenv(name);
        if (value == null) {
            throw new IllegalArgumentException(name + " is required");
        }
        return value;
    }

    private static String orDefault(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    private static boolean flag(String name) {
        String value = orDefault(name, "");
        return switch (value) {
            case "", "0", "false" -> false;
            case "1", "true" -> true;
            default -> throw new IllegalArgumentException(name + " must be 1, true, 0 or false, not " + value);
        };
    }

    private static long millis(String name, long fallback) {
        String value = System.getenv(name);
        try {
            return value == null ? fallback : Long.parseLong(value.strip());
        } catch (NumberFormatException invalid) {
            throw new IllegalArgumentException(name + " must be a number of ms, not " + value);
        }
    }
}
