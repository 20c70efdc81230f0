package io.kadence.sample;

import io.kadence.executor.JobContext;
import io.kadence.executor.JobFailedException;
import io.kadence.executor.KadenceJob;
import io.kadence.executor.KadenceJobHelper;
import java.time.Duration;
import org.springframework.stereotype.Component;

/**
 * Handlers as an XXL-JOB service had them, ported: {@code @XxlJob} became {@code @KadenceJob}
 * and {@code XxlJobHelper} became {@code KadenceJobHelper}; nothing else changed.
 */
@Component
public class SampleJobs {
    /** XXL-JOB's demo handler, ported mechanically. */
    @KadenceJob("demoJobHandler")
    public void demoJobHandler() throws InterruptedException {
        KadenceJobHelper.log("KADENCE-JOB, Hello World.");
        for (int i = 0; i < 5; i++) {
            KadenceJobHelper.log("beat at: {}", i);
            Thread.sleep(200);
        }
    }

    /** A sharded job: each shard takes its part of the work. */
    @KadenceJob("shardingJobHandler")
    public void shardingJobHandler() {
        int index = KadenceJobHelper.getShardIndex();
        int total = KadenceJobHelper.getShardTotal();
        KadenceJobHelper.log("shard {} of {}", index, total);
        for (int item = 0; item < 10; item++) {
            if (item % total == index) {
                KadenceJobHelper.log("item {} is mine", item);
            }
        }
    }

    /** Lifecycle hooks and a success note, written against the context. */
    @KadenceJob(value = "reportJobHandler", init = "open", destroy = "close")
    public String reportJobHandler(JobContext ctx) throws JobFailedException {
        if (ctx.params().isBlank()) {
            throw new JobFailedException("params must name the report", Duration.ofMinutes(5));
        }
        ctx.log("building report {}", ctx.params());
        return "report " + ctx.params() + " built";
    }

    void open() {
        // e.g. open a connection pool the report uses
    }

    void close() {
        // and close it when the executor stops
    }
}
