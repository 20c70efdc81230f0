"""One run (PROTOCOL.md sections 4 and 6): the handler in a thread of its own, under the
trigger's timeout and its stop (KILL, COVER_EARLY, shutdown), its log lines shipped every
250 ms and always before its result, and exactly one result.

Log lines: at most 4096 bytes of UTF-8 each (a longer one is cut at a character boundary and
says so), and ``LogRecord`` s of at most 500 lines and at most 256 KiB of line text
(``MAX_RECORD_LINE_BYTES``), whichever comes first: 500 lines of 4 KiB would make a 2 MB
record, over Kafka's default 1 MB limits (the broker's ``message.max.bytes``, the producer's
``max.request.size``). Each record names its run: the trigger, and when this run of it
started (``run_started_at_ms``, the result's ``started_at_ms``), so that the lines of a
trigger run twice (handed back in a rebalance, its executor crashed) stay apart in the
scheduler. ``Publisher.publish_logs`` returns once the broker acknowledged every record
shipped, and the result is published after the last shipping: lines before the result.

Python cannot stop a thread from outside: a run that is stopped or times out is answered at
once, and its handler sees ``ctx.cancelled`` set and should return soon; nothing it does
afterwards is reported.
"""

import logging
import threading
import time

LOG_FLUSH_INTERVAL_S = 0.25
MAX_LINE_BYTES = 4096
LINES_PER_RECORD = 500
MAX_RECORD_LINE_BYTES = 256 * 1024
SHUTDOWN_MESSAGE = "run was cancelled: the executor is shutting down"

log = logging.getLogger("kadence_executor")


def now_ms():
    return time.time_ns() // 1_000_000


class JobFailed(Exception):
    """Raised by a handler to fail its run with this message; ``retry_after_ms`` hints when a
    retry makes sense."""

    def __init__(self, message, retry_after_ms=None):
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class JobLogger:
    """A run's log: lines kept up to a limit (what is cut is said in a last line)."""

    def __init__(self, max_lines):
        self.max_lines = max_lines
        self._lock = threading.Lock()
        self._pending = []
        self._next_line = 1
        self._kept = 0
        self._dropped = 0

    def log(self, line):
        line = str(line).rstrip("\n")
        encoded = line.encode()
        if len(encoded) > MAX_LINE_BYTES:
            # Cut at a character boundary: a partial character at the end is left out.
            kept = encoded[:MAX_LINE_BYTES].decode(errors="ignore")
            line = f"{kept}… [cut at {MAX_LINE_BYTES} bytes]"
        with self._lock:
            if self._kept >= self.max_lines:
                self._dropped += 1
                return
            self._kept += 1
            self._pending.append(line)

    def take(self, final):
        """(first line number, lines) written since the last take; the final take says how
        many lines were cut."""
        with self._lock:
            if final and self._dropped:
                self._pending.append(
                    f"[{self._dropped} more lines cut: a run keeps at most {self.max_lines}]"
                )
                self._dropped = 0
            first, lines = self._next_line, self._pending
            self._pending = []
            self._next_line += len(lines)
            return first, lines


class JobContext:
    """What a handler receives."""

    def __init__(self, trigger, logger, cancelled, shadow=False):
        self._trigger = trigger
        self._logger = logger
        #: Set when the run is stopped (kill, COVER_EARLY, timeout, shutdown).
        self.cancelled = cancelled
        #: True when a shadow executor runs it: the same trigger runs in production, and this
        #: result is only compared with that one. Leave side effects out when it is set.
        self.shadow = shadow

    params = property(lambda self: self._trigger["params"])
    shard_index = property(lambda self: self._trigger["shard_index"])
    shard_total = property(lambda self: self._trigger["shard_total"])
    trigger_id = property(lambda self: self._trigger["trigger_id"])
    job_id = property(lambda self: self._trigger["job_id"])
    log_id = property(lambda self: self._trigger["log_id"])
    attempt = property(lambda self: self._trigger["attempt"])
    scheduled_at_ms = property(lambda self: self._trigger["scheduled_at_ms"])
    trigger_type = property(lambda self: self._trigger["trigger_type"])

    def log(self, line):
        """Appends a line to the run's log."""
        self._logger.log(line)


def result_record(trigger, executor_id, code, message, started_ms, finished_ms, retry=None):
    return {
        "trigger_id": trigger["trigger_id"],
        "log_id": trigger["log_id"],
        "job_id": trigger["job_id"],
        "app": trigger["app"],
        "executor_id": executor_id,
        "code": code,
        "message": message,
        "started_at_ms": started_ms,
        "finished_at_ms": finished_ms,
        "attempt": trigger["attempt"],
        "retry_after_ms": retry,
    }


def humanize(millis):
    return f"{millis // 1000} s" if millis % 1000 == 0 else f"{millis} ms"


def run_handler(handler, trigger, stop, logger, ship_logs, shadow=False):
    """Runs `handler` for `trigger` until it ends, `stop` fires or the timeout passes; returns
    (code, message, retry_after_ms): a handler that returns a non-empty string succeeds with
    it as its note. `ship_logs` is called every 250 ms meanwhile; `shadow`:
    a shadow executor runs it (the handler sees ``ctx.shadow``)."""
    outcome = {}

    def call():
        try:
            returned = handler(JobContext(trigger, logger, stop.event, shadow))
            # A success carries no message unless the handler returns a note (XXL-JOB's
            # ``handleSuccess(msg)``; PROTOCOL.md section 6).
            note = returned if isinstance(returned, str) and returned else None
            outcome["answer"] = (200, note, None)
        except JobFailed as error:
            outcome["answer"] = (500, str(error), error.retry_after_ms)
        except Exception as error:  # a handler's crash is its run's failure
            outcome["answer"] = (500, str(error) or type(error).__name__, None)
        finally:
            stop.wake.set()

    threading.Thread(target=call, daemon=True, name=f"run-{trigger['trigger_id']}").start()
    timeout_ms = trigger["timeout_ms"]
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
    next_flush = time.monotonic() + LOG_FLUSH_INTERVAL_S
    while True:
        until = next_flush if deadline is None else min(next_flush, deadline)
        stop.wake.wait(max(0.0, until - time.monotonic()))
        # A run stopped from outside ends with the reason it was stopped for, even when its
        # handler saw the cancellation and returned first.
        if stop.event.is_set():
            return 500, stop.reason or SHUTDOWN_MESSAGE, None
        if "answer" in outcome:
            return outcome["answer"]
        if deadline is not None and time.monotonic() >= deadline:
            stop.event.set()
            return 502, f"run timed out after {humanize(timeout_ms)} and was cancelled", None
        if time.monotonic() >= next_flush:
            ship_logs(False)
            next_flush += LOG_FLUSH_INTERVAL_S


def log_records(trigger, executor_id, run_started_ms, first, lines):
    """The LogRecords of `lines` numbered from `first`, written by the run of `trigger` that
    started at `run_started_ms`: at most 500 lines and 256 KiB of line text each."""
    start = 0
    while start < len(lines):
        end, size = start, 0
        while end < len(lines) and end - start < LINES_PER_RECORD:
            size += len(lines[end].encode())
            if size > MAX_RECORD_LINE_BYTES and end > start:
                break
            end += 1
        yield {
            "trigger_id": trigger["trigger_id"],
            "log_id": trigger["log_id"],
            "job_id": trigger["job_id"],
            "executor_id": executor_id,
            "first_line": first + start,
            "lines": lines[start:end],
            "emitted_at_ms": now_ms(),
            "run_started_at_ms": run_started_ms,
        }
        start = end


def log_locally(trigger, first, lines):
    """A shadow run's lines, numbered from `first`, to this process's logging at debug level:
    in ``{prefix}.logs`` they would mix into the production run of the same trigger id."""
    for number, line in enumerate(lines, start=first):
        log.debug("shadow run %s log line %d: %s", trigger["trigger_id"], number, line)
