package io.kadence.sample;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A Spring Boot service running Kadence jobs: the starter builds the executor from
 * {@code application.properties} and runs the {@code @KadenceJob} methods of
 * {@link SampleJobs}. Start it with the app's keys in the environment:
 * {@code KADENCE_EXECUTOR_KEY=... KADENCE_TRUSTED_KEY=... java -jar ...}.
 */
@SpringBootApplication
public class SampleApplication {
    public static void main(String[] args) {
        SpringApplication.run(SampleApplication.class, args);
    }
}
