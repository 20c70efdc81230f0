package io.kadence.executor;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a method as the handler named {@link #value()}, as XXL-JOB's {@code @XxlJob(value,
 * init, destroy)}. The method takes nothing or a {@link JobContext}, returns {@code void} or a
 * {@code String} (a success note), and throws to fail. {@link #init()} and {@link #destroy()}
 * name methods of the same bean without parameters: init runs once before the handler's first
 * run, destroy once when the executor stops (if init ran). Register the bean with
 * {@code ExecutorBuilder.handlers(bean)}.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface KadenceJob {
    /** The handler name jobs give. */
    String value();

    /** A method of the same bean to run once before the first run; empty for none. */
    String init() default "";

    /** A method of the same bean to run once when the executor stops; empty for none. */
    String destroy() default "";
}
