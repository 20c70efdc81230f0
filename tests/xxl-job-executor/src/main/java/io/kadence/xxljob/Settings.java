package io.kadence.xxljob;

import java.util.Map;

/**
 * The executor's configuration, read from environment variables only (the tests start it as a
 * process). Each variable maps to one property of XXL-JOB's executor configuration:
 *
 * <ul>
 *   <li>{@code XXL_JOB_ADMIN_ADDRESSES} (required): comma-separated admin base URLs, as {@code
 *       xxl.job.admin.addresses}; xxl-job-core appends {@code api/registry} and the like.
 *   <li>{@code XXL_JOB_ACCESS_TOKEN} (optional): the token both sides send and check; empty or
 *       unset means none.
 *   <li>{@code XXL_JOB_APPNAME} (required): the executor group's app name.
 *   <li>{@code XXL_JOB_IP} (default {@code 127.0.0.1}) and {@code XXL_JOB_PORT} (required, 1 to
 *       65535): where the embedded server is reached; it registers {@code http://{ip}:{port}/}.
 *   <li>{@code XXL_JOB_LOG_PATH} (required): the folder of the job log files.
 *   <li>{@code XXL_JOB_LOG_RETENTION_DAYS} (default 3, the smallest value for which
 *       xxl-job-core cleans up at all; below 3 it keeps every log).
 * </ul>
 *
 * @param adminAddresses the admin addresses, verbatim
 * @param accessToken the access token, {@code null} when none is configured
 * @param appname the app name
 * @param ip the address the executor registers and is probed on
 * @param port the port the embedded server binds (on every interface)
 * @param logPath the job log folder
 * @param logRetentionDays how many days job logs are kept
 */
public record Settings(
        String adminAddresses,
        String accessToken,
        String appname,
        String ip,
        int port,
        String logPath,
        int logRetentionDays) {

    /** The default of {@code XXL_JOB_IP}. */
    public static final String DEFAULT_IP = "127.0.0.1";

    /** The default of {@code XXL_JOB_LOG_RETENTION_DAYS}. */
    public static final int DEFAULT_LOG_RETENTION_DAYS = 3;

    /**
     * Reads the settings from an environment.
     *
     * @param env the environment, usually {@link System#getenv()}
     * @return the settings
     * @throws IllegalArgumentException naming the variable that is missing or malformed
     */
    public static Settings fromEnv(Map<String, String> env) {
        String token = optional(env, "XXL_JOB_ACCESS_TOKEN");
        String ip = optional(env, "XXL_JOB_IP");
        String retention = optional(env, "XXL_JOB_LOG_RETENTION_DAYS");
        return new Settings(
                required(env, "XXL_JOB_ADMIN_ADDRESSES"),
                // An empty token must mean "none": xxl-job-core 3.x sends an empty
                // XXL-JOB-ACCESS-TOKEN header for "" but no header at all for null.
                token,
                required(env, "XXL_JOB_APPNAME"),
                ip == null ? DEFAULT_IP : ip,
                integer("XXL_JOB_PORT", required(env, "XXL_JOB_PORT"), 1, 65535),
                required(env, "XXL_JOB_LOG_PATH"),
                retention == null
                        ? DEFAULT_LOG_RETENTION_DAYS
                        : integer("XXL_JOB_LOG_RETENTION_DAYS", retention, 0, Integer.MAX_VALUE));
    }

    private static String optional(Map<String, String> env, String name) {
        String value = env.get(name);
        return value == null || value.isBlank() ? null : value.strip();
    }

    private static String required(Map<String, String> env, String name) {
        String value = optional(env, name);
        if (value == null) {
            throw new IllegalArgumentException(name + " is not set: it is required");
        }
        return value;
    }

    private static int integer(String name, String value, int min, int max) {
        try {
            int parsed = Integer.parseInt(value);
            if (parsed >= min && parsed <= max) {
                return parsed;
            }
        } catch (NumberFormatException notANumber) {
            // reported below, with the range
        }
        throw new IllegalArgumentException(
                name + " must be a whole number from " + min + " to " + max + ", not '" + value + "'");
    }
}
