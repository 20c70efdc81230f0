package io.kadence.executor.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The executor's settings under {@code kadence.executor.*} (each one a setting of
 * {@code io.kadence.executor.ExecutorBuilder}, with its default when left out). The executor
 * is configured when {@code kadence.executor.app} is set.
 */
@ConfigurationProperties(prefix = "kadence.executor")
public class KadenceExecutorProperties {
    /** Kafka bootstrap servers, comma separated. */
    private String brokers;
    /** The executor app (XXL-JOB's executor group / appname). */
    private String app;
    /** The topic prefix the scheduler uses. */
    private String topicPrefix = "kadence";
    /** This executor's id; by default {app}-{host}-{pid}-{random}. */
    private String executorId;
    /** Scheduler public keys (base64, from `kadence key list`). */
    private List<String> trustedKeys = new ArrayList<>();
    /** Run without verifying triggers (only where nobody else can write the trigger topics). */
    private boolean allowUnverified;
    /** The app's executor key, {key id}.{secret} (`kadence executor-key create --app APP`). */
    private String executorKey;
    /** Run without signing what the executor writes. */
    private boolean allowUnsigned;
    /** classic (the default) or consumer (KIP-848). */
    private String groupProtocol = "classic";
    /** kafka (the default) or tansu. */
    private String brokerKind = "kafka";
    /** A shadow executor. */
    private boolean shadow;
    /** Serve Prometheus metrics on GET /metrics at host:port. */
    private String metricsAddress;
    private Duration sessionTimeout;
    private Duration beatInterval;
    private Duration drainTimeout;
    /** How long runs of a revoked partition may finish before they are handed back (5 s; at
     * most half the session timeout under the classic protocol, so a shorter session needs a
     * shorter wait). */
    private Duration handBackWait;
    /** Run script (GLUE_*) triggers. */
    private boolean scripts;
    /** Start the executor with the application context (false: start it yourself). */
    private boolean autoStartup = true;
    /** Other Kafka client settings (security, timeouts), for every client of the executor. */
    private Map<String, String> kafka = new LinkedHashMap<>();

    public String getBrokers() { return brokers; }
    public void setBrokers(String brokers) { this.brokers = brokers; }
    public String getApp() { return app; }
    public void setApp(String app) { this.app = app; }
    public String getTopicPrefix() { return topicPrefix; }
    public void setTopicPrefix(String topicPrefix) { this.topicPrefix = topicPrefix; }
    public String getExecutorId() { return executorId; }
    public void setExecutorId(String executorId) { this.executorId = executorId; }
    public List<String> getTrustedKeys() { return trustedKeys; }
    public void setTrustedKeys(List<String> trustedKeys) { this.trustedKeys = trustedKeys; }
    public boolean isAllowUnverified() { return allowUnverified; }
    public void setAllowUnverified(boolean allowUnverified) { this.allowUnverified = allowUnverified; }
    public String getExecutorKey() { return executorKey; }
    public void setExecutorKey(String executorKey) { this.executorKey = executorKey; }
    public boolean isAllowUnsigned() { return allowUnsigned; }
    public void setAllowUnsigned(boolean allowUnsigned) { this.allowUnsigned = allowUnsigned; }
    public String getGroupProtocol() { return groupProtocol; }
    public void setGroupProtocol(String groupProtocol) { this.groupProtocol = groupProtocol; }
    public String getBrokerKind() { return brokerKind; }
    public void setBrokerKind(String brokerKind) { this.brokerKind = brokerKind; }
    public boolean isShadow() { return shadow; }
    public void setShadow(boolean shadow) { this.shadow = shadow; }
    public String getMetricsAddress() { return metricsAddress; }
    public void setMetricsAddress(String metricsAddress) { this.metricsAddress = metricsAddress; }
    public Duration getSessionTimeout() { return sessionTimeout; }
    public void setSessionTimeout(Duration sessionTimeout) { this.sessionTimeout = sessionTimeout; }
    public Duration getBeatInterval() { return beatInterval; }
    public void setBeatInterval(Duration beatInterval) { this.beatInterval = beatInterval; }
    public Duration getDrainTimeout() { return drainTimeout; }
    public void setDrainTimeout(Duration drainTimeout) { this.drainTimeout = drainTimeout; }
    public Duration getHandBackWait() { return handBackWait; }
    public void setHandBackWait(Duration handBackWait) { this.handBackWait = handBackWait; }
    public boolean isScripts() { return scripts; }
    public void setScripts(boolean scripts) { this.scripts = scripts; }
    public boolean isAutoStartup() { return autoStartup; }
    public void setAutoStartup(boolean autoStartup) { this.autoStartup = autoStartup; }
    public Map<String, String> getKafka() { return kafka; }
    public void setKafka(Map<String, String> kafka) { this.kafka = kafka; }
}
