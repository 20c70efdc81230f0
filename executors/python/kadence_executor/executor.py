"""The public face: ``Executor`` (settings and handlers) and how it runs until a signal.

```python
from kadence_executor import Executor, JobFailed

def send_report(ctx):
    if not ctx.params:
        raise JobFailed("params must name the region")
    ctx.log(f"report for {ctx.params}")

executor = Executor(brokers="127.0.0.1:9092", app="billing",
                    trusted_keys=["<the scheduler's public key, from kadence key list>"],
                    executor_key="<the app's key, from kadence executor-key create --app billing>")
executor.handler("sendReport", send_report)
executor.run()  # until SIGTERM or SIGINT, then drains
```

The work is done by ``consumer.Loop`` (see there for the tour).

``Executor(..., shadow=True)`` is a *shadow executor* (PROTOCOL.md section 10): it runs its
handlers (a candidate version) on a copy of the app's triggers in the group
``{prefix}.shadow.{app}``, starting at the topic's live end, and publishes its results to
``{prefix}.shadow-results``, where they complete nothing; it sends no beats, ships no job log
lines (they go to this process's logging, at debug level) and dead-letters nothing. Handlers
see ``ctx.shadow``.

``Executor(..., group_protocol="consumer")`` joins the group with Kafka's consumer group
protocol (KIP-848; the broker must offer it, as Apache Kafka 4 does) instead of the classic one:
the broker then keeps the session and heartbeat (its ``group.consumer.session.timeout.ms`` and
``group.consumer.heartbeat.interval.ms``) and assigns the partitions, so the consumer sets
neither ``session.timeout.ms`` nor ``heartbeat.interval.ms`` and ``session_timeout_ms`` only says
how long the executor waits for the control topic at start; a rebalance moves only the
partitions that change owner (``consumer`` handles assignments as changes under either).
A trusted key is required: ``Executor(...)`` without ``trusted_keys`` raises, unless
``allow_unverified=True`` says to run every trigger and control record unverified (a network
where only the scheduler can write those topics, or a test feeding hand-made records), which
the executor then logs as an error when it starts (the Rust SDK's ``allow_unverified``).
An executor key is required the same way: ``executor_key="{key id}.{secret}"`` (made with
``kadence executor-key create --app APP``) signs every record the executor writes (``signing``,
``publishing``), and ``Executor(...)`` without one raises, unless ``allow_unsigned=True`` says to
write unsigned records (for a scheduler that does not require executor signatures yet, or a
test), which the executor then logs as an error when it starts (the Rust SDK's
``allow_unsigned``). A key text that is not ``{16 hex}.{43 base64url}`` raises however
``allow_unsigned`` is set: a typo must never become a silent unsigned run.

``Executor(..., broker_kind="tansu")`` says the broker is tansu, the development broker: the
trigger consumer then starts each partition it is assigned before the group's committed offset
and drops the records before it (``resume``), and waits at most 10 ms for a fetch. The default,
``"kafka"``, is Apache Kafka and brokers with its semantics.
The protocol is chosen here only: ``group.protocol`` in ``kafka_options`` is refused, as are,
under ``consumer``, the raw options librdkafka refuses with it (``CLASSIC_ONLY_OPTIONS``).
"""

import os
import secrets
import signal
import socket
import threading
from dataclasses import dataclass, field

from .consumer import Loop
from .signing import ExecutorKey, TrustedKeys

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_PREFIX_CHARS = _NAME_CHARS | {"."}

GROUP_PROTOCOLS = ("classic", "consumer")
# "kafka": Apache Kafka and brokers with its semantics; "tansu": the development broker, whose
# quirks the client works round (the Rust SDK's BrokerKind).
BROKER_KINDS = ("kafka", "tansu")
# librdkafka refuses these in a consumer of the "consumer" group protocol: the broker keeps the
# session and heartbeat and assigns the partitions.
CLASSIC_ONLY_OPTIONS = (
    "session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy",
    "group.protocol.type",
)


@dataclass
class Settings:
    """What an executor runs with; every default as the Rust SDK's."""

    brokers: str
    app: str
    topic_prefix: str = "kadence"
    executor_id: str = None
    session_timeout_ms: int = 10_000
    group_protocol: str = "classic"
    broker_kind: str = "kafka"
    max_in_flight: int = 20_000
    max_concurrent_per_job: int = 16
    drain_timeout_s: float = 30.0
    commit_interval_s: float = 1.0
    beat_interval_s: float = 3.0
    rebalance_timeout_s: float = 5.0
    kill_memory_ms: int = 24 * 3600 * 1000
    max_log_lines: int = 10_000
    trusted_keys: TrustedKeys = field(default_factory=TrustedKeys)
    kafka_options: dict = field(default_factory=dict)
    shadow: bool = False
    allow_unverified: bool = False
    executor_key: ExecutorKey = None
    allow_unsigned: bool = False

    def group(self):
        """The consumer group: ``{prefix}.executor.{app}``, or ``{prefix}.shadow.{app}`` for a
        shadow executor."""
        role = "shadow" if self.shadow else "executor"
        return f"{self.topic_prefix}.{role}.{self.app}"

    def offset_reset(self):
        """Where a group without offsets starts: production at the beginning (triggers emitted
        before any executor joined must run), a shadow at the live end (a candidate must not
        run the topic's history)."""
        return "latest" if self.shadow else "earliest"

    def results_topic(self):
        """Where results go: ``{prefix}.results``, or ``{prefix}.shadow-results`` for a shadow
        executor (whose results complete nothing)."""
        return f"{self.topic_prefix}.{'shadow-results' if self.shadow else 'results'}"

    def client_config(self):
        """The brokers and the operator's raw librdkafka options."""
        config = {"bootstrap.servers": self.brokers}
        config.update(self.kafka_options)
        return config

    def group_consumer_config(self):
        """The trigger consumer's librdkafka settings; the operator's raw options win."""
        config = {
            "bootstrap.servers": self.brokers,
            "group.id": self.group(),
            "group.protocol": self.group_protocol,
            "client.id": self.executor_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": self.offset_reset(),
        }
        if self.broker_kind == "tansu":
            # tansu holds every fetch for its whole wait even when records are there; Kafka
            # answers at the first record, so librdkafka's 500 ms costs it no latency.
            config["fetch.wait.max.ms"] = 10
        if self.group_protocol == "classic":
            # Under "consumer" the broker keeps both, and librdkafka refuses a consumer that
            # sets either. Heartbeats at a tenth of the session, as the Rust SDK's.
            config["session.timeout.ms"] = self.session_timeout_ms
            config["heartbeat.interval.ms"] = max(100, min(3000, self.session_timeout_ms // 10))
            # Named, not left to the client's default: a classic group's members must share an
            # assignor, and an app's executors may be of other SDKs (PROTOCOL.md section 1).
            config["partition.assignment.strategy"] = "range"
        config.update(self.kafka_options)
        return config

    def cooperative(self):
        """Whether librdkafka rebalances this consumer incrementally: under the consumer
        protocol, or the classic one with the cooperative-sticky assignor."""
        strategy = self.kafka_options.get("partition.assignment.strategy", "")
        return self.group_protocol == "consumer" or "cooperative-sticky" in strategy

    def check(self):
        if not self.brokers or not self.brokers.strip():
            raise ValueError("brokers are required")
        if not (1 <= len(self.app) <= 64 and set(self.app) <= _NAME_CHARS):
            raise ValueError(f"invalid app name {self.app!r}: use 1 to 64 of A-Z a-z 0-9 _ -")
        prefix = self.topic_prefix
        if not (1 <= len(prefix) <= 64 and set(prefix) <= _PREFIX_CHARS):
            raise ValueError(f"invalid topic prefix {prefix!r}: use 1 to 64 of A-Z a-z 0-9 . _ -")
        if self.beat_interval_s <= 0 or self.max_in_flight < 1:
            raise ValueError("beat_interval_s must be positive and max_in_flight at least 1")
        if self.group_protocol == "classic" and self.rebalance_timeout_s * 2000 > self.session_timeout_ms:
            # A rebalance that comes near the session can drop the members waiting for it; each
            # one rejoins and starts the next rebalance, and a long run is handed back over and
            # over (PROTOCOL.md section 7).
            raise ValueError(
                f"rebalance_timeout_s ({self.rebalance_timeout_s:g} s) must be at most half of "
                f"session_timeout_ms ({self.session_timeout_ms} ms) under the classic group "
                "protocol: a rebalance that comes near the session drops members and starts "
                "again, handing long runs back over and over"
            )
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(
                f'unknown group_protocol {self.group_protocol!r}: use "classic" or "consumer"'
            )
        if not self.trusted_keys and not self.allow_unverified:
            raise ValueError(
                "no trusted key: an executor runs only triggers the scheduler signed, so give it "
                "the scheduler's public key (`kadence key list`) with trusted_keys=[...]; on a "
                "network where only the scheduler can write the trigger and control topics, "
                "allow_unverified=True runs without verifying"
            )
        if self.executor_key is None and not self.allow_unsigned:
            raise ValueError(
                "no executor key: a scheduler takes only results, logs and beats signed with a key "
                "of their app, so give the executor one with executor_key=\"{key id}.{secret}\" "
                "(`kadence executor-key create --app APP` shows it once); while the scheduler does "
                "not require executor signatures (executor_auth.required = false), "
                "allow_unsigned=True runs without signing"
            )
        if self.broker_kind not in BROKER_KINDS:
            raise ValueError(
                f'unknown broker_kind {self.broker_kind!r}: use "kafka" (Apache Kafka and brokers '
                'with its semantics) or "tansu"'
            )
        if "group.protocol" in self.kafka_options:
            # It decides which other settings the consumer may carry, and a raw option would
            # reach the control reader and the producer too.
            raise ValueError(
                "kafka_options sets group.protocol: choose it with group_protocol= instead"
            )
        refused = [key for key in CLASSIC_ONLY_OPTIONS if key in self.kafka_options]
        if self.group_protocol == "consumer" and refused:
            raise ValueError(
                f"kafka_options sets {', '.join(refused)}, which group_protocol=\"consumer\" does "
                "not take: the broker sets the session, the heartbeat and the assignment "
                "(group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms, "
                'group.consumer.assignors); leave them out, or use group_protocol="classic"'
            )


class Executor:
    """A member of its app's consumer group that runs the registered handlers."""

    def __init__(self, brokers, app, trusted_keys=(), executor_key=None, **options):
        self.settings = Settings(
            brokers=brokers, app=app, trusted_keys=TrustedKeys(trusted_keys),
            executor_key=None if executor_key is None else ExecutorKey(executor_key), **options
        )
        self.settings.check()
        if self.settings.executor_id is None:
            suffix = secrets.token_hex(3)
            host = socket.gethostname()
            self.settings.executor_id = f"{app}-{host}-{os.getpid()}-{suffix}"
        self.handlers = {}
        self.stopping = threading.Event()
        self.partition_listeners = []

    @property
    def executor_id(self):
        return self.settings.executor_id

    def handler(self, name, function):
        """Registers `function(ctx)` under `name`, the job's handler name in the scheduler."""
        if not name:
            raise ValueError("a handler name is empty")
        if name in self.handlers:
            raise ValueError(f"handler {name!r} is registered twice")
        self.handlers[name] = function
        return self

    def on_partitions(self, callback):
        """Calls ``callback(partitions)`` (ascending) whenever the group assigns or revokes
        partitions of the trigger topic, from the consumer's thread: how to learn that the
        executor consumes, for a shadow executor, which sends no beats (for a shadow, once its
        start in each partition is fixed, so every trigger emitted after reaches it)."""
        self.partition_listeners.append(callback)
        return self

    def stop(self):
        """Asks a running executor to stop gracefully (as SIGTERM does)."""
        self.stopping.set()

    def run(self, install_signal_handlers=True):
        """Runs until ``stop()`` or, with `install_signal_handlers`, SIGTERM or SIGINT; then
        drains: takes no new triggers, lets running ones finish within the drain timeout,
        commits, leaves the group and sends a last beat."""
        if not self.handlers:
            raise ValueError("register at least one handler with .handler(name, function)")
        if install_signal_handlers:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: self.stopping.set())
        listeners = list(self.partition_listeners)
        Loop(self.settings, dict(self.handlers), self.stopping, listeners).run()
