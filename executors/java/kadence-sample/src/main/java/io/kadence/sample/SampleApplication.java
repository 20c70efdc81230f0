package io.kadence.sample;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A Spring Boot service running Kadence jobs: the starter builds the executor from
 * {@code application.properties} and runs the {@code @KadenceJob} methods of
 * {@link SampleJobs}. The package phase makes it an executable jar; start it with the
 * variables every Kadence executor reads (listed in {@code application.properties}):
 * {@code KADENCE_BROKERS=127.0.0.1:9092 KADENCE_TRUSTED_KEYS=... KADENCE_EXECUTOR_KEY=...
 * java -jar kadence-sample/target/kadence-sample-0.1.0.jar} ({@code infra/java-sample.sh}
 * builds it and prints that command; {@code infra/dev.sh --java} runs it as the app
 * {@code sample} of the dev stack). SIGTERM or Ctrl-C stops it gracefully; it exits 143
 * (130 after Ctrl-C), the JVM's code for a stop by signal.
 */
@SpringBootApplication
public class SampleApplication {
    public static void main(String[] args) {
        SpringApplication.run(SampleApplication.class, args);
    }
}
