import java.io.BufferedReader;
import java.io.BufferedOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Date;
import java.util.TimeZone;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.quartz.CronExpression;

/**
 * Quartz's own answer for the differential test (quartz_parity/main.rs): reads one request a
 * line on standard input, {@code expression TAB zone TAB after-ms TAB count}, and answers one
 * line each: {@code OK TAB ms,ms,...} (the next fires, fewer when the expression runs out),
 * {@code ERR TAB message} when Quartz refuses the expression, or {@code HANG} when it has not
 * answered within two seconds.
 *
 * <p>Only Quartz's CronExpression is used, as XXL-JOB uses its copy of it: new
 * CronExpression(text), setTimeZone, getNextValidTimeAfter.
 */
public class QuartzFires {
    static String answer(String request) {
        String[] parts = request.split("\t");
        try {
            CronExpression cron = new CronExpression(parts[0]);
            cron.setTimeZone(TimeZone.getTimeZone(parts[1]));
            Date after = new Date(Long.parseLong(parts[2]));
            int count = Integer.parseInt(parts[3]);
            StringBuilder fires = new StringBuilder("OK\t");
            for (int i = 0; i < count; i++) {
                Date next = cron.getNextValidTimeAfter(after);
                if (next == null) {
                    break;
                }
                fires.append(i == 0 ? "" : ",").append(next.getTime());
                after = next;
            }
            return fires.toString();
        } catch (Exception e) {
            return "ERR\t" + String.valueOf(e.getMessage()).replace('\t', ' ').replace('\n', ' ');
        }
    }

    /** The thread answering, replaced when one request hangs it. */
    static Thread current;

    static ExecutorService newWorker() {
        return Executors.newSingleThreadExecutor(task -> {
            current = new Thread(task);
            current.setDaemon(true);
            return current;
        });
    }

    // Thread.stop: a CronExpression caught in a loop cannot be interrupted any other way, and
    // one stuck request must not hold up the others (JDK 17 still honours it).
    @SuppressWarnings({"deprecation", "removal"})
    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out =
                new PrintStream(new BufferedOutputStream(System.out), false, StandardCharsets.UTF_8);
        ExecutorService worker = newWorker();
        String line;
        while ((line = in.readLine()) != null) {
            final String request = line;
            Future<String> answer = worker.submit(() -> answer(request));
            try {
                out.println(answer.get(2, TimeUnit.SECONDS));
            } catch (TimeoutException stuck) {
                try {
                    current.stop();
                } catch (UnsupportedOperationException laterJdk) {
                    // JDK 20 and later no longer stop threads: leave it spinning (a daemon).
                }
                worker.shutdownNow();
                worker = newWorker();
                out.println("HANG");
            }
        }
        worker.shutdownNow();
        out.flush();
    }
}
