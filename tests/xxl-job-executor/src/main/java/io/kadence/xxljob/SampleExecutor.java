package io.kadence.xxljob;

import com.xxl.job.core.executor.impl.XxlJobSimpleExecutor;
import com.xxl.job.core.log.XxlJobFileAppender;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A frameless XXL-JOB executor ({@link XxlJobSimpleExecutor}, no Spring) running {@link
 * SampleHandlers}, configured from the environment ({@link Settings}).
 *
 * <p>Once its embedded server accepts connections it prints one line to standard output, {@code
 * xxl-job sample executor {version} listening on {ip}:{port}}, where version is the
 * xxl-job-core it was built against; everything else goes to standard error. SIGTERM and SIGINT
 * stop it through {@code destroy()}, which kills running jobs (their callbacks say so) and sends
 * {@code registryRemove}. It exits with 2 on a configuration error and with 1 when the server
 * does not come up.
 */
public final class SampleExecutor {
    private static final Logger LOG = LoggerFactory.getLogger(SampleExecutor.class);

    /**
     * How long the embedded server may take to bind: xxl-job-core binds in a thread of its own
     * after {@code start()} returns, and only logs a failure there.
     */
    private static final long LISTEN_TIMEOUT_MS = 10_000;

    private SampleExecutor() {}

    /**
     * Starts the executor and waits until the process is stopped.
     *
     * @param args ignored: the configuration is the environment's
     * @throws InterruptedException never in practice: the main thread waits for nothing
     */
    public static void main(String[] args) throws InterruptedException {
        Settings settings;
        try {
            settings = Settings.fromEnv(System.getenv());
        } catch (IllegalArgumentException invalid) {
            System.err.println("xxl-job sample executor: " + invalid.getMessage());
            System.exit(2);
            return;
        }
        String version = xxlJobVersion();
        LOG.info(
                "starting xxl-job sample executor {}: appname {}, admin {}, {}:{}, access token {}, logs in {}",
                version,
                settings.appname(),
                settings.adminAddresses(),
                settings.ip(),
                settings.port(),
                settings.accessToken() == null ? "none" : "set",
                settings.logPath());

        // xxl-job-core would only log a taken port from its server thread and keep running
        // deaf, so a taken port is refused here, before anything registers.
        if (!portFree(settings.port())) {
            System.err.println("xxl-job sample executor: port " + settings.port() + " is already in use");
            System.exit(1);
            return;
        }

        keepCallbackRetriesUnder(settings.logPath());
        XxlJobSimpleExecutor executor = new XxlJobSimpleExecutor();
        executor.setAdminAddresses(settings.adminAddresses());
        executor.setAccessToken(settings.accessToken());
        executor.setAppname(settings.appname());
        executor.setIp(settings.ip());
        executor.setPort(settings.port());
        executor.setLogPath(settings.logPath());
        executor.setLogRetentionDays(settings.logRetentionDays());
        executor.setXxlJobBeanList(List.of(new SampleHandlers()));
        executor.start();

        if (!awaitListening(settings.ip(), settings.port())) {
            System.err.println("xxl-job sample executor: the embedded server did not accept connections on "
                    + settings.ip() + ":" + settings.port() + " within " + LISTEN_TIMEOUT_MS + " ms");
            executor.destroy();
            System.exit(1);
            return;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            LOG.info("stopping: killing running jobs and sending registryRemove");
            executor.destroy();
            LOG.info("stopped");
        }, "xxl-job sample executor shutdown"));

        System.out.println("xxl-job sample executor " + version + " listening on " + settings.ip() + ":" + settings.port());
        System.out.flush();

        // xxl-job-core's threads are all daemons: this thread keeps the JVM alive until a signal.
        new CountDownLatch(1).await();
    }

    /** The xxl-job-core version recorded at build time by resource filtering. */
    private static String xxlJobVersion() {
        Properties properties = new Properties();
        try (InputStream in = SampleExecutor.class.getResourceAsStream("/xxl-job-sample-executor.properties")) {
            if (in != null) {
                properties.load(in);
            }
        } catch (IOException unreadable) {
            LOG.warn("cannot read the build's xxl-job version", unreadable);
        }
        return properties.getProperty("xxl-job.version", "unknown");
    }

    /**
     * Puts the files of callbacks waiting for a retry under the log folder, where 2.x and 3.4
     * put them. xxl-job-core 3.3.2 computes that folder once, from its default log path, and
     * {@code initLogPath} never moves it: every 3.3.2 executor on a machine would write
     * {@code /data/applogs/xxl-job/jobhandler/callbacklogs}, need the right to create it, and
     * re-send the retry files of the others (each retry pass reads and deletes every file
     * there) to its own admins. The field only exists from 3.x on; 2.x needs nothing. Must run
     * before {@code start()}, which loads the class that reads the field.
     */
    private static void keepCallbackRetriesUnder(String logPath) {
        Field folder;
        try {
            folder = XxlJobFileAppender.class.getDeclaredField("callbackLogPath");
        } catch (NoSuchFieldException before3) {
            return;
        }
        try {
            folder.setAccessible(true);
            folder.set(null, new File(logPath, "callbacklogs").getPath());
        } catch (ReflectiveOperationException | RuntimeException refused) {
            throw new IllegalStateException("cannot move xxl-job-core's callback retry folder under " + logPath, refused);
        }
    }

    /** Whether the port can be bound on every interface, as the embedded server binds it. */
    private static boolean portFree(int port) {
        try (ServerSocket probe = new ServerSocket()) {
            probe.setReuseAddress(false);
            probe.bind(new InetSocketAddress(port));
            return true;
        } catch (IOException taken) {
            return false;
        }
    }

    /** Waits until ip:port accepts a TCP connection, at most {@link #LISTEN_TIMEOUT_MS}. */
    private static boolean awaitListening(String ip, int port) throws InterruptedException {
        long deadline = System.nanoTime() + LISTEN_TIMEOUT_MS * 1_000_000;
        while (System.nanoTime() < deadline) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(ip, port), 200);
                return true;
            } catch (IOException notYet) {
                Thread.sleep(20);
            }
        }
        return false;
    }
}
