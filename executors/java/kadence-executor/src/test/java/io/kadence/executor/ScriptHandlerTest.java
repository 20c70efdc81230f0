package io.kadence.executor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kadence.executor.internal.JobLog;
import io.kadence.executor.internal.Pending;
import io.kadence.executor.internal.Run;
import io.kadence.executor.wire.Records.BlockStrategy;
import io.kadence.executor.wire.Records.GlueType;
import io.kadence.executor.wire.Records.TriggerRecord;
import io.kadence.executor.wire.Records.TriggerType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ScriptHandlerTest {
    @TempDir
    Path temp;

    private static TriggerRecord script(GlueType type, String source) {
        return new TriggerRecord("5-1", 1, 5, "app", "", "first second", 2, 3, BlockStrategy.SERIAL_EXECUTION, 0,
                TriggerType.MANUAL, 0, 0, 0, type, source, 77L, null, null);
    }

    private Path privateDir() {
        Path dir = temp.resolve("scripts");
        ScriptHandler.prepare(dir);
        return dir;
    }

    private static JobContext context(TriggerRecord trigger, JobLog log) {
        return new JobContext(trigger, log, new Run(new Pending(trigger, 0, 0, 0, null)), false);
    }

    private static List<String> lines(JobLog log) {
        return log.take(true).stream().flatMap(chunk -> chunk.lines().stream()).toList();
    }

    @Test
    void aShellScriptGetsItsArgumentsAndItsOutputIsLogged() throws Exception {
        Path dir = privateDir();
        JobLog log = new JobLog(100);
        TriggerRecord trigger = script(GlueType.GLUE_SHELL, "echo \"$1|$2|$3\"; echo oops >&2; exit 0");
        new ScriptHandler(dir).run(context(trigger, log), trigger);
        List<String> written = lines(log);
        assertEquals("[kadence] running GLUE_SHELL version 77 with bash", written.get(0));
        assertTrue(written.containsAll(List.of("first second|2|3", "oops")), written.toString());
        try (var left = Files.list(dir)) {
            assertEquals(0, left.count(), "the script file is deleted when the run ends");
        }
    }

    @Test
    void failuresSayWhy() {
        Path dir = privateDir();
        ScriptHandler scripts = new ScriptHandler(dir);
        TriggerRecord exits = script(GlueType.GLUE_SHELL, "exit 3");
        assertEquals("script exited with code 3", assertThrows(JobFailedException.class,
                () -> scripts.run(context(exits, new JobLog(10)), exits)).getMessage());
        TriggerRecord killed = script(GlueType.GLUE_SHELL, "kill -9 $$");
        assertEquals("script was stopped by a signal (signal: 9 (SIGKILL))", assertThrows(JobFailedException.class,
                () -> scripts.run(context(killed, new JobLog(10)), killed)).getMessage());
        TriggerRecord empty = script(GlueType.GLUE_SHELL, null);
        assertEquals("GLUE_SHELL trigger carries no script source (glue_source is empty)",
                assertThrows(JobFailedException.class, () -> scripts.run(context(empty, new JobLog(10)), empty))
                        .getMessage());
        TriggerRecord pwsh = script(GlueType.GLUE_POWERSHELL, "Write-Output hi");
        assertEquals("interpreter \"pwsh\" for GLUE_POWERSHELL is not installed on this executor (not found on PATH)",
                assertThrows(JobFailedException.class, () -> scripts.run(context(pwsh, new JobLog(10)), pwsh))
                        .getMessage());
    }

    @Test
    void aStoppedRunKillsTheScriptsWholeProcessGroup() throws Exception {
        Path dir = privateDir();
        Path marker = temp.resolve("child.pid");
        TriggerRecord trigger = script(GlueType.GLUE_SHELL, "sleep 300 & echo $! > " + marker + "; wait");
        ExecutorService thread = Executors.newSingleThreadExecutor();
        Future<?> running = thread.submit(() -> {
            new ScriptHandler(dir).run(context(trigger, new JobLog(10)), trigger);
            return null;
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!(Files.exists(marker) && Files.size(marker) > 0) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        long child = Long.parseLong(Files.readString(marker).strip());
        running.cancel(true); // as a KILL or a timeout interrupts the handler's thread
        thread.shutdown();
        assertTrue(thread.awaitTermination(10, TimeUnit.SECONDS));
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertTrue(ProcessHandle.of(child).map(p -> !p.isAlive()).orElse(true), "the script's child was killed");
    }

    @Test
    void aScriptDirectoryOpenToOthersIsRefused() throws Exception {
        Path open = temp.resolve("open");
        Files.createDirectory(open, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxr-xr-x"));
        ExecutorConfigException refused = assertThrows(ExecutorConfigException.class, () -> ScriptHandler.prepare(open));
        assertTrue(refused.getMessage().contains("is open to other users (mode 755)"), refused.getMessage());
        Path made = temp.resolve("made");
        ScriptHandler.prepare(made);
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(made)));
    }
}
