package io.kadence.executor.spring;

import io.kadence.executor.ExecutorConfigException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.origin.OriginTrackedValue;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.Environment;
import org.springframework.core.env.PropertySource;

/**
 * Turns the executor's refusal of its settings ({@link ExecutorConfigException}, thrown when the
 * context starts the executor) into Spring Boot's "APPLICATION FAILED TO START" report instead
 * of a stack trace: the description is the SDK's message, the action names the
 * {@code kadence.executor.*} properties that the builder settings in it correspond to, and,
 * where the application's configuration fills one from a placeholder
 * ({@code kadence.executor.brokers=${KADENCE_BROKERS:}}), the variables it reads. Registered
 * in {@code META-INF/spring.factories}; Spring Boot logs the stack trace at DEBUG only.
 */
public class KadenceExecutorFailureAnalyzer extends AbstractFailureAnalyzer<ExecutorConfigException> {
    /** What the SDK's messages name (builder settings and values), and the property for each. */
    private static final String[][] PROPERTIES = {
        {"brokers(", "kadence.executor.brokers"},
        {"app(", "kadence.executor.app"},
        {"app name", "kadence.executor.app"},
        {"topic prefix", "kadence.executor.topic-prefix"},
        {"trustedKey", "kadence.executor.trusted-keys"},
        {"allowUnverified()", "kadence.executor.allow-unverified=true"},
        {"executorKey", "kadence.executor.executor-key"},
        {"allowUnsigned()", "kadence.executor.allow-unsigned=true"},
        {"scripts(true)", "kadence.executor.scripts"},
        {"metricsAddress", "kadence.executor.metrics-address"},
        {"sessionTimeout", "kadence.executor.session-timeout"},
        {"session timeout", "kadence.executor.session-timeout"},
        {"beatInterval", "kadence.executor.beat-interval"},
        {"kafkaOption(\"", "kadence.executor.kafka.*"},
        {"kadence.executor.group-protocol", "kadence.executor.group-protocol"},
        {"kadence.executor.broker-kind", "kadence.executor.broker-kind"},
    };
    private static final Pattern PLACEHOLDER = Pattern.compile("\\$\\{([^}:]+)");

    private final Environment environment;

    /** Spring Boot passes the application's environment, where the properties came from. */
    public KadenceExecutorFailureAnalyzer(Environment environment) {
        this.environment = environment;
    }

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, ExecutorConfigException cause) {
        String message = cause.getMessage();
        return new FailureAnalysis("The Kadence executor refuses its settings: " + message, action(message), cause);
    }

    /** The action for the SDK's {@code message}: the properties it speaks of, in its order. */
    String action(String message) {
        List<String[]> found = new ArrayList<>();
        for (String[] entry : PROPERTIES) {
            if (message.contains(entry[0])) {
                found.add(entry);
            }
        }
        found.sort(Comparator.comparingInt(entry -> message.indexOf(entry[0])));
        Set<String> named = new LinkedHashSet<>();
        for (String[] entry : found) {
            named.add(entry[1] + readFrom(entry[1].replaceAll("=.*|\\.\\*$", "")));
        }
        if (named.isEmpty()) {
            return "Correct the kadence.executor.* properties the description speaks of.";
        }
        return "Set " + String.join(", or ", named) + ".";
    }

    /** " (which this application reads from X)" when {@code property} is a placeholder of
     * variables X in the application's configuration; "" otherwise. */
    private String readFrom(String property) {
        if (!(environment instanceof ConfigurableEnvironment configurable)) {
            return "";
        }
        for (PropertySource<?> source : configurable.getPropertySources()) {
            Object raw = source.getProperty(property);
            if (raw instanceof OriginTrackedValue tracked) {
                raw = tracked.getValue();
            }
            if (raw == null) {
                continue;
            }
            List<String> variables = new ArrayList<>();
            Matcher placeholder = PLACEHOLDER.matcher(raw.toString());
            while (placeholder.find()) {
                variables.add(placeholder.group(1));
            }
            return variables.isEmpty() ? "" : " (which this application reads from " + String.join(", ", variables) + ")";
        }
        return "";
    }
}
