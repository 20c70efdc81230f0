package io.kadence.executor;

import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Script handlers (the protocol decisions, rule 3): XXL-JOB's GLUE_SHELL, GLUE_PYTHON,
 * GLUE_NODEJS, GLUE_PHP and GLUE_POWERSHELL, run as the Rust SDK runs them. The source that
 * travels in the trigger is written to a new file {@code {script dir}/{job id}_{glue version or
 * 0}_{random}.{ext}}, mode 0600, in a private directory (0700, this user's, not a link; checked
 * when the executor is built), deleted when the run ends; then {@code interpreter file params
 * shard_index shard_total} runs with an empty stdin and the executor's environment, every line
 * of its stdout and stderr going to the run's log.
 *
 * <p>Java 17 cannot put a child in a process group of its own, so the script runs under
 * {@code setsid} (util-linux), which makes it the leader of a new session and group with the
 * same pid: on timeout, KILL, shutdown (the handler's thread is interrupted) and when the script
 * exits, {@code kill -KILL -- -pid} ends the whole group, so nothing the script left behind
 * outlives its run. The JDK reports a death by signal n as the exit value 128 + n, the same as
 * {@code exit 128+n}: values 129 to 159 are read as signals (a script exiting with one of them
 * deliberately is rare, and is reported as stopped by that signal).
 */
final class ScriptHandler {
    private static final Set<PosixFilePermission> PRIVATE_FILE = PosixFilePermissions.fromString("rw-------");
    private static final String[] SIGNALS = {"", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT",
        "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM"};

    private final Path dir;

    ScriptHandler(Path dir) {
        this.dir = dir;
    }

    /** The interpreter and file extension of {@code glueType}. */
    static String[] interpreter(GlueType glueType) {
        return switch (glueType) {
            case BEAN -> null;
            case GLUE_SHELL -> new String[] {"bash", "sh"};
            case GLUE_PYTHON -> new String[] {"python3", "py"};
            case GLUE_NODEJS -> new String[] {"node", "js"};
            case GLUE_PHP -> new String[] {"php", "php"};
            case GLUE_POWERSHELL -> new String[] {"pwsh", "ps1"};
        };
    }

    /** Runs the script of the context's trigger; throws to fail the run. */
    void run(JobContext ctx, TriggerRecord trigger) throws Exception {
        String[] how = interpreter(trigger.glueType());
        String program = how[0];
        if (trigger.glueSource() == null) {
            throw new JobFailedException(trigger.glueType() + " trigger carries no script source (glue_source is empty)");
        }
        if (onPath(program) == null) {
            throw new JobFailedException("interpreter \"" + program + "\" for " + trigger.glueType()
                    + " is not installed on this executor (not found on PATH)");
        }
        long version = trigger.glueUpdatedAtMs() == null ? 0 : trigger.glueUpdatedAtMs();
        byte[] random = new byte[16];
        ThreadLocalRandom.current().nextBytes(random);
        Path file = dir.resolve(trigger.jobId() + "_" + version + "_" + HexFormat.of().formatHex(random) + "." + how[1]);
        Process process = null;
        try {
            Files.write(file, trigger.glueSource().getBytes(StandardCharsets.UTF_8), StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE);
            Files.setPosixFilePermissions(file, PRIVATE_FILE);
            ProcessBuilder builder = new ProcessBuilder("setsid", program, file.toString(), trigger.params(),
                    Integer.toString(trigger.shardIndex()), Integer.toString(trigger.shardTotal()));
            builder.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
            process = builder.start();
            ctx.log("[kadence] running " + trigger.glueType() + " version " + version + " with " + program);
            List<Thread> readers = new ArrayList<>();
            readers.add(forward(process.getInputStream(), ctx));
            readers.add(forward(process.getErrorStream(), ctx));
            int status = process.waitFor();
            killGroup(process.pid());
            for (Thread reader : readers) {
                reader.join(1_000);
            }
            if (status == 0) {
                return;
            }
            if (status > 128 && status < 160) {
                int signal = status - 128;
                String name = signal < SIGNALS.length ? " (" + SIGNALS[signal] + ")" : "";
                throw new JobFailedException("script was stopped by a signal (signal: " + signal + name + ")");
            }
            throw new JobFailedException("script exited with code " + status);
        } finally {
            if (process != null) {
                killGroup(process.pid());
            }
            Files.deleteIfExists(file);
        }
    }

    private static Thread forward(InputStream output, JobContext ctx) {
        Thread thread = new Thread(() -> {
            try (BufferedReader lines = new BufferedReader(new InputStreamReader(output, StandardCharsets.UTF_8))) {
                String line;
                while ((line = lines.readLine()) != null) {
                    ctx.log(line);
                }
            } catch (IOException closed) {
                // the group was killed
            }
        }, "kadence-script-output");
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    /** SIGKILL to the process group led by {@code pid} (gone already is fine). */
    private static void killGroup(long pid) {
        try {
            Process kill = new ProcessBuilder("kill", "-KILL", "--", "-" + pid)
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            kill.waitFor(5, TimeUnit.SECONDS);
        } catch (IOException error) {
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
        } catch (InterruptedException interrupted) {
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            Thread.currentThread().interrupt();
        }
    }

    private static Path onPath(String program) {
        String path = System.getenv("PATH");
        if (path == null) {
            return null;
        }
        for (String entry : path.split(File.pathSeparator)) {
            Path candidate = Path.of(entry.isEmpty() ? "." : entry, program);
            if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
                return candidate;
            }
        }
        return null;
    }

    /**
     * Makes {@code dir} the executor's private script directory, or says why it cannot be: a
     * missing one is made with mode 0700; one that exists must be a directory (not a link),
     * this user's, and closed to everyone else, or another local user could read the scripts
     * or swap one between its writing and its run.
     */
    static void prepare(Path dir) {
        try {
            if (dir.getParent() != null) {
                Files.createDirectories(dir.getParent());
            }
            if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
                return;
            }
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                throw new ExecutorConfigException("the script directory " + dir + " is not a directory (a symbolic link "
                        + "or a file is there): remove it, or choose another with scriptDir");
            }
            int owner = (Integer) Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            int me = currentUid();
            if (owner != me) {
                throw new ExecutorConfigException("the script directory " + dir + " belongs to user id " + owner
                        + ", not to this executor's (" + me + "): another user made it, so it cannot hold the scripts "
                        + "this executor runs; remove it, or choose another with scriptDir");
            }
            int mode = (Integer) Files.getAttribute(dir, "unix:mode", LinkOption.NOFOLLOW_LINKS) & 0777;
            if ((mode & 0077) != 0) {
                throw new ExecutorConfigException("the script directory " + dir + " is open to other users (mode "
                        + Integer.toOctalString(mode) + "): make it 0700 (chmod 700), or choose another with scriptDir");
            }
        } catch (IOException error) {
            throw new ExecutorConfigException("cannot create the script directory " + dir + ": " + error);
        }
    }

    /** This process's user id: the owner of a file it makes. */
    static int currentUid() throws IOException {
        Path probe = Files.createTempFile("kadence-uid", "");
        try {
            return (Integer) Files.getAttribute(probe, "unix:uid");
        } finally {
            Files.deleteIfExists(probe);
        }
    }

    /** {@code {temp dir}/kadence-scripts-{user id}}: one directory per local user. */
    static Path defaultDir() {
        try {
            return Path.of(System.getProperty("java.io.tmpdir"), "kadence-scripts-" + currentUid());
        } catch (IOException error) {
            return Path.of(System.getProperty("java.io.tmpdir"), "kadence-scripts-" + System.getProperty("user.name"));
        }
    }
}
