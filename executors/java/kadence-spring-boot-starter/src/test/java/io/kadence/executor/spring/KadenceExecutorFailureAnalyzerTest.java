package io.kadence.executor.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.Executor;
import io.kadence.executor.ExecutorConfigException;
import java.net.URL;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;
import org.springframework.context.ApplicationContextException;
import org.springframework.core.env.MapPropertySource;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.io.UrlResource;
import org.springframework.core.io.support.PropertiesLoaderUtils;
import org.springframework.core.io.support.SpringFactoriesLoader;

class KadenceExecutorFailureAnalyzerTest {
    private static final String KEY = "0123456789abcdef.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

    /** The analysis of the builder's refusal, wrapped as the context wraps a failed start,
     * in an application whose configuration holds {@code properties}. */
    private static FailureAnalysis analysis(Runnable build, String... properties) {
        ExecutorConfigException refused = assertThrows(ExecutorConfigException.class, build::run);
        StandardEnvironment environment = new StandardEnvironment();
        Map<String, Object> configuration = new LinkedHashMap<>();
        for (String property : properties) {
            String[] pair = property.split("=", 2);
            configuration.put(pair[0], pair[1]);
        }
        environment.getPropertySources().addFirst(new MapPropertySource("application.properties", configuration));
        FailureAnalysis analysis = new KadenceExecutorFailureAnalyzer(environment)
                .analyze(new ApplicationContextException("Failed to start bean 'kadenceExecutorLifecycle'", refused));
        assertNotNull(analysis, "the analyzer finds the refusal under the context's exception");
        assertEquals("The Kadence executor refuses its settings: " + refused.getMessage(), analysis.getDescription());
        return analysis;
    }

    @Test
    void theActionNamesThePropertiesOfTheSettingsTheMessageNames() {
        assertEquals("Set kadence.executor.trusted-keys, or kadence.executor.allow-unverified=true.",
                analysis(() -> Executor.builder().brokers("b").app("a").executorKey(KEY).build()).getAction());
        assertEquals("Set kadence.executor.executor-key, or kadence.executor.allow-unsigned=true.",
                analysis(() -> Executor.builder().brokers("b").app("a").allowUnverified().build()).getAction());
        assertEquals("Set kadence.executor.brokers.",
                analysis(() -> Executor.builder().app("a").allowUnverified().executorKey(KEY).build()).getAction());
        assertEquals("Set kadence.executor.app.",
                analysis(() -> Executor.builder().brokers("b").allowUnverified().executorKey(KEY).build()).getAction());
        assertEquals("Set kadence.executor.app.", analysis(() -> Executor.builder().brokers("b").app("a.b")
                .allowUnverified().executorKey(KEY).build()).getAction());
    }

    @Test
    void theActionNamesTheVariablesTheConfigurationReadsThePropertiesFrom() {
        assertEquals("Set kadence.executor.trusted-keys (which this application reads from KADENCE_TRUSTED_KEYS), "
                + "or kadence.executor.allow-unverified=true (which this application reads from "
                + "KADENCE_ALLOW_UNVERIFIED).",
                analysis(() -> Executor.builder().brokers("b").app("a").executorKey(KEY).build(),
                        "kadence.executor.trusted-keys=${KADENCE_TRUSTED_KEYS:}",
                        "kadence.executor.allow-unverified=${KADENCE_ALLOW_UNVERIFIED:false}").getAction());
        assertEquals("Set kadence.executor.brokers.", analysis(
                () -> Executor.builder().app("a").allowUnverified().executorKey(KEY).build(),
                "kadence.executor.brokers=").getAction());
    }

    @Test
    void aMessageNamingNoSettingStillGetsAnAction() {
        assertEquals("Correct the kadence.executor.* properties the description speaks of.",
                new KadenceExecutorFailureAnalyzer(new StandardEnvironment()).action("something else"));
    }

    @Test
    void springBootFindsTheAnalyzer() throws java.io.IOException {
        // Every spring.factories on the class path, as Spring Boot reads them for its analyzers.
        List<String> analyzers = new ArrayList<>();
        for (URL url : Collections.list(getClass().getClassLoader()
                .getResources(SpringFactoriesLoader.FACTORIES_RESOURCE_LOCATION))) {
            String names = PropertiesLoaderUtils.loadProperties(new UrlResource(url))
                    .getProperty(FailureAnalyzer.class.getName(), "");
            analyzers.addAll(List.of(names.split(",")));
        }
        assertTrue(analyzers.contains(KadenceExecutorFailureAnalyzer.class.getName()), analyzers.toString());
    }
}
