package io.kadence.executor;

import io.kadence.executor.internal.Settings;
import io.kadence.executor.wire.ExecutorKey;
import io.kadence.executor.wire.Ids;
import io.kadence.executor.wire.TrustedKeys;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Configures an {@link Executor}: {@code Executor.builder().brokers("kafka:9092").app("billing")
 * .trustedKey(...).executorKey(...).handlers(bean).build()}. {@link #build()} checks everything
 * and refuses, with an {@link ExecutorConfigException} saying what to set, settings that cannot
 * run: no app or brokers, an invalid key, no trusted key without {@link #allowUnverified()}, no
 * executor key without {@link #allowUnsigned()}.
 *
 * <p>Defaults are the Rust SDK's: topic prefix {@code kadence}; the classic group protocol with
 * a 10 s session, 1 s heartbeat and the {@code range} assignor; beats every 3 s; commits every
 * second; a 30 s drain on a graceful stop; a 5 s hand-back wait at a revocation (under the
 * classic protocol at most half the session timeout: a rebalance that comes near the session
 * drops members, which rejoin and start the next one, handing a long run back again and again);
 * KILLs remembered 24 h; 20 000 triggers in flight; 16 concurrent runs per CONCURRENT job;
 * 10 000 log lines per run.
 */
public final class ExecutorBuilder {
    /** Group settings the broker owns under KIP-848: refused with the consumer protocol. */
    private static final Set<String> CLASSIC_ONLY =
            Set.of("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy", "group.remote.assignor");

    private String brokers;
    private String app;
    private String topicPrefix = "kadence";
    private String executorId;
    private GroupProtocol groupProtocol = GroupProtocol.CLASSIC;
    private BrokerKind brokerKind = BrokerKind.KAFKA;
    private boolean shadow;
    private final List<String> trustedKeys = new ArrayList<>();
    private boolean allowUnverified;
    private String executorKey;
    private boolean allowUnsigned;
    private Duration sessionTimeout = Duration.ofSeconds(10);
    private Duration beatInterval = Duration.ofSeconds(3);
    private Duration commitInterval = Duration.ofSeconds(1);
    private Duration drainTimeout = Duration.ofSeconds(30);
    private Duration handBackWait = Duration.ofSeconds(5);
    private Duration killMemory = Duration.ofHours(24);
    private int maxInFlight = 20_000;
    private int maxConcurrentPerJob = 16;
    private int maxLogLines = 10_000;
    private String metricsAddress;
    private boolean scripts;
    private boolean allowUnverifiedScripts;
    private java.nio.file.Path scriptDir;
    private final Map<String, String> kafkaOptions = new LinkedHashMap<>();
    private final Map<String, HandlerRegistry.Entry> handlers = new LinkedHashMap<>();
    private final List<String> duplicates = new ArrayList<>();

    ExecutorBuilder() {}

    /** The Kafka bootstrap servers, comma separated. Required. */
    public ExecutorBuilder brokers(String brokers) {
        this.brokers = brokers;
        return this;
    }

    /** The executor app (XXL-JOB's executor group). Required. */
    public ExecutorBuilder app(String app) {
        this.app = app;
        return this;
    }

    /** The topic prefix the scheduler uses ({@code kadence} by default). */
    public ExecutorBuilder topicPrefix(String topicPrefix) {
        this.topicPrefix = topicPrefix;
        return this;
    }

    /** This executor's id, unique among live executors; by default {@code {app}-{host}-{pid}-{random}}. */
    public ExecutorBuilder executorId(String executorId) {
        this.executorId = executorId;
        return this;
    }

    public ExecutorBuilder groupProtocol(GroupProtocol groupProtocol) {
        this.groupProtocol = groupProtocol;
        return this;
    }

    public ExecutorBuilder brokerKind(BrokerKind brokerKind) {
        this.brokerKind = brokerKind;
        return this;
    }

    /** A shadow executor (PROTOCOL.md section 10): group {@code {p}.shadow.{app}}, results to
     * {@code {p}.shadow-results}, no beats, logs or dead letters. */
    public ExecutorBuilder shadow(boolean shadow) {
        this.shadow = shadow;
        return this;
    }

    /** Trusts a scheduler public key (base64 of its 32 bytes, as {@code kadence key list}
     * prints it); several during a rotation. */
    public ExecutorBuilder trustedKey(String base64) {
        trustedKeys.add(base64);
        return this;
    }

    /** Runs without a trusted key: verifies nothing (logs an error saying so at start). Only
     * where nobody but the scheduler can write the trigger and control topics. */
    public ExecutorBuilder allowUnverified() {
        this.allowUnverified = true;
        return this;
    }

    /** The app's executor key, {@code {key id}.{secret}} as {@code kadence executor-key create}
     * prints it: signs every record the executor writes. */
    public ExecutorBuilder executorKey(String key) {
        this.executorKey = key;
        return this;
    }

    /** Runs without an executor key: signs nothing (logs an error saying so at start). Only
     * against a scheduler that does not require executor signatures. */
    public ExecutorBuilder allowUnsigned() {
        this.allowUnsigned = true;
        return this;
    }

    /** The classic protocol's session timeout (10 s). */
    public ExecutorBuilder sessionTimeout(Duration sessionTimeout) {
        this.sessionTimeout = sessionTimeout;
        return this;
    }

    public ExecutorBuilder beatInterval(Duration beatInterval) {
        this.beatInterval = beatInterval;
        return this;
    }

    public ExecutorBuilder commitInterval(Duration commitInterval) {
        this.commitInterval = commitInterval;
        return this;
    }

    /** How long a graceful stop lets what it took go on (30 s): running runs finish, queued
     * ones start as their lane frees, held ones at their millisecond; whatever has not finished
     * at the deadline gets no result and no commit. */
    public ExecutorBuilder drainTimeout(Duration drainTimeout) {
        this.drainTimeout = drainTimeout;
        return this;
    }

    /** How long a revocation waits for the runs of revoked partitions (5 s; at most half the
     * session timeout under the classic group protocol, or {@link #build()} refuses). */
    public ExecutorBuilder handBackWait(Duration handBackWait) {
        this.handBackWait = handBackWait;
        return this;
    }

    /** How long KILLs are remembered for triggers that arrive later (24 h). */
    public ExecutorBuilder killMemory(Duration killMemory) {
        this.killMemory = killMemory;
        return this;
    }

    /** Triggers received and unanswered before fetching pauses (20 000). */
    public ExecutorBuilder maxInFlight(int maxInFlight) {
        this.maxInFlight = maxInFlight;
        return this;
    }

    /** Runs of one CONCURRENT job at once (16). */
    public ExecutorBuilder maxConcurrentPerJob(int maxConcurrentPerJob) {
        this.maxConcurrentPerJob = maxConcurrentPerJob;
        return this;
    }

    /** Lines a run keeps (10 000); what is cut is said in a last line. */
    public ExecutorBuilder maxLogLines(int maxLogLines) {
        this.maxLogLines = maxLogLines;
        return this;
    }

    /** Serves Prometheus metrics on {@code GET /metrics} at {@code host:port}. */
    public ExecutorBuilder metricsAddress(String hostPort) {
        this.metricsAddress = hostPort;
        return this;
    }

    /**
     * Runs script triggers (GLUE_SHELL, GLUE_PYTHON, GLUE_NODEJS, GLUE_PHP, GLUE_POWERSHELL):
     * the source they carry runs here, so this needs a trusted key unless
     * {@link #allowUnverifiedScripts()}. Off by default: script triggers are then answered
     * with the protocol's "does not run scripts" failure.
     */
    public ExecutorBuilder scripts(boolean scripts) {
        this.scripts = scripts;
        return this;
    }

    /** Runs scripts from unverified triggers too (a network where only the scheduler can write
     * the trigger topic). Implies {@link #allowUnverified()} when no key is trusted. */
    public ExecutorBuilder allowUnverifiedScripts() {
        this.allowUnverifiedScripts = true;
        return this;
    }

    /** Where scripts are written ({@code {temp dir}/kadence-scripts-{user id}} by default): a
     * private directory (0700, this user's), made when missing, refused otherwise. */
    public ExecutorBuilder scriptDir(java.nio.file.Path scriptDir) {
        this.scriptDir = scriptDir;
        return this;
    }

    /** Any other Kafka client setting (security, timeouts), for every client of the executor. */
    public ExecutorBuilder kafkaOption(String key, String value) {
        kafkaOptions.put(key, value);
        return this;
    }

    /** Registers {@code handler} under {@code name}. */
    public ExecutorBuilder handler(String name, JobHandler handler) {
        return handler(name, handler, null, null);
    }

    /** Registers {@code handler} under {@code name} with hooks (either may be null): init once
     * before its first run, destroy once when the executor stops. */
    public ExecutorBuilder handler(String name, JobHandler handler, Runnable init, Runnable destroy) {
        add(new HandlerRegistry.Entry(name, handler, init, destroy));
        return this;
    }

    /** Registers every {@link KadenceJob} method of {@code bean}. */
    public ExecutorBuilder handlers(Object bean) {
        HandlerRegistry.annotated(bean).forEach(this::add);
        return this;
    }

    private void add(HandlerRegistry.Entry entry) {
        if (handlers.putIfAbsent(entry.name(), entry) != null) {
            duplicates.add(entry.name());
        }
    }

    /** Checks the settings and builds the executor. */
    public Executor build() {
        TrustedKeys trusted = checkedTrust();
        ExecutorKey key = checkedExecutorKey();
        if (brokers == null || brokers.isBlank()) {
            throw new ExecutorConfigException("no brokers: set brokers(\"host:port,...\") to the Kafka cluster the "
                    + "scheduler uses");
        }
        if (app == null) {
            throw new ExecutorConfigException("no app: set app(\"name\") to the executor app whose triggers to run");
        }
        try {
            Ids.checkAppName(app);
            Ids.checkTopicPrefix(topicPrefix);
        } catch (IllegalArgumentException invalid) {
            throw new ExecutorConfigException(invalid.getMessage());
        }
        if (!duplicates.isEmpty()) {
            throw new ExecutorConfigException("handler names registered twice: " + String.join(", ", duplicates));
        }
        for (String name : handlers.keySet()) {
            if (name == null || name.isBlank()) {
                throw new ExecutorConfigException("a handler name must not be empty");
            }
        }
        positive("beatInterval", beatInterval);
        positive("commitInterval", commitInterval);
        positive("sessionTimeout", sessionTimeout);
        if (maxInFlight < 1 || maxConcurrentPerJob < 1 || maxLogLines < 1) {
            throw new ExecutorConfigException("maxInFlight, maxConcurrentPerJob and maxLogLines must be at least 1");
        }
        boolean classic = groupProtocol == GroupProtocol.CLASSIC;
        if (classic && handBackWait.multipliedBy(2).compareTo(sessionTimeout) > 0) {
            throw new ExecutorConfigException("handBackWait (" + handBackWait.toMillis() + " ms) must be at most half "
                    + "of the session timeout (" + sessionTimeout.toMillis() + " ms) under the classic group "
                    + "protocol: a rebalance that comes near the session drops members and starts again, handing "
                    + "long runs back over and over");
        }
        if (!classic) {
            for (String option : kafkaOptions.keySet()) {
                if (CLASSIC_ONLY.contains(option)) {
                    throw new ExecutorConfigException("kafkaOption(\"" + option + "\") is not allowed with "
                            + "groupProtocol(GroupProtocol.CONSUMER): the broker sets it under KIP-848");
                }
            }
        }
        InetSocketAddress metrics = metricsAddress == null ? null : address(metricsAddress);
        String id = executorId != null ? executorId : defaultExecutorId(app);
        Settings settings = new Settings(brokers, app, topicPrefix, id, classic, brokerKind == BrokerKind.TANSU,
                shadow, trusted, key, sessionTimeout, beatInterval, commitInterval, drainTimeout, handBackWait,
                killMemory, maxInFlight, maxConcurrentPerJob, maxLogLines, metrics, Map.copyOf(kafkaOptions));
        ScriptHandler scriptHandler = null;
        if (scripts) {
            java.nio.file.Path dir = scriptDir != null ? scriptDir : ScriptHandler.defaultDir();
            ScriptHandler.prepare(dir);
            scriptHandler = new ScriptHandler(dir);
        }
        return new Executor(settings, new HandlerRegistry(handlers, scriptHandler));
    }

    private TrustedKeys checkedTrust() {
        TrustedKeys trusted;
        try {
            trusted = TrustedKeys.parse(trustedKeys);
        } catch (IllegalArgumentException invalid) {
            throw new ExecutorConfigException("trustedKey: " + invalid.getMessage());
        }
        if (scripts && trusted.isEmpty() && !allowUnverifiedScripts) {
            throw new ExecutorConfigException("scripts(true) runs the source that triggers carry, so it needs at least "
                    + "one trustedKey (the scheduler's public key, from `kadence key list`) to run only signed "
                    + "triggers; on a trusted network, allowUnverifiedScripts() runs unsigned ones too");
        }
        if (trusted.isEmpty() && !allowUnverified && !allowUnverifiedScripts) {
            throw new ExecutorConfigException("no trusted key: an executor runs only triggers the scheduler signed, so "
                    + "give it the scheduler's public key (`kadence key list`) with trustedKey(...); on a network where "
                    + "only the scheduler can write the trigger and control topics, allowUnverified() runs without "
                    + "verifying");
        }
        return trusted;
    }

    private ExecutorKey checkedExecutorKey() {
        if (executorKey != null) {
            try {
                return ExecutorKey.parse(executorKey);
            } catch (IllegalArgumentException invalid) {
                throw new ExecutorConfigException("executorKey: " + invalid.getMessage());
            }
        }
        if (allowUnsigned) {
            return null;
        }
        throw new ExecutorConfigException("no executor key: the scheduler takes only results, log lines and beats "
                + "signed with a key of their app, so give the executor its app's key (`kadence executor-key create "
                + "--app APP` prints one) with executorKey(...); against a scheduler that does not require them, "
                + "allowUnsigned() runs without one");
    }

    private static void positive(String name, Duration value) {
        if (value.isZero() || value.isNegative()) {
            throw new ExecutorConfigException(name + " must be longer than zero");
        }
    }

    private static InetSocketAddress address(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        try {
            String host = hostPort.substring(0, colon).replace("[", "").replace("]", "");
            return new InetSocketAddress(host, Integer.parseInt(hostPort.substring(colon + 1)));
        } catch (RuntimeException invalid) {
            throw new ExecutorConfigException("metricsAddress must be host:port, not " + hostPort);
        }
    }

    private static String defaultExecutorId(String app) {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName().replaceAll("[^A-Za-z0-9_-]", "-");
        } catch (Exception unknown) {
            host = "host";
        }
        String pid = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];
        byte[] random = new byte[3];
        new SecureRandom().nextBytes(random);
        return app + "-" + host + "-" + pid + "-" + HexFormat.of().formatHex(random);
    }
}
