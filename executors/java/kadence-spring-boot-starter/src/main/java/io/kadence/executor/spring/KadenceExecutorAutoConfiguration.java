package io.kadence.executor.spring;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * Configures a Kadence executor when {@code kadence.executor.app} is set: the properties
 * ({@link KadenceExecutorProperties}) and the lifecycle that builds, starts and stops it
 * ({@link KadenceExecutorLifecycle}). An application that defines its own lifecycle bean keeps
 * it.
 */
@AutoConfiguration
@ConditionalOnProperty(prefix = "kadence.executor", name = "app")
@EnableConfigurationProperties(KadenceExecutorProperties.class)
public class KadenceExecutorAutoConfiguration {
    @Bean
    @ConditionalOnMissingBean
    public KadenceExecutorLifecycle kadenceExecutorLifecycle(KadenceExecutorProperties properties,
            ApplicationContext context) {
        return new KadenceExecutorLifecycle(properties, context);
    }
}
