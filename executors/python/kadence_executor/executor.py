"""The public face: ``Executor`` (settings and handlers) and how it runs until a signal.

```python
from kadence_executor import Executor, JobFailed

def send_report(ctx):
    if not ctx.params:
        raise JobFailed("params must name the region")
    ctx.log(f"report for {ctx.params}")

executor = Executor(brokers="127.0.0.1:9092", app="billing")
executor.handler("sendReport", send_report)
executor.run()  # until SIGTERM or SIGINT, then drains
```

The work is done by ``consumer.Loop`` (see there for the tour).
"""

import os
import secrets
import signal
import socket
import threading
from dataclasses import dataclass, field

from .consumer import Loop
from .signing import TrustedKeys

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_PREFIX_CHARS = _NAME_CHARS | {"."}


@dataclass
class Settings:
    """What an executor runs with; every default as the Rust SDK's."""

    brokers: str
    app: str
    topic_prefix: str = "kadence"
    executor_id: str = None
    session_timeout_ms: int = 10_000
    max_in_flight: int = 20_000
    max_concurrent_per_job: int = 16
    drain_timeout_s: float = 30.0
    commit_interval_s: float = 1.0
    beat_interval_s: float = 3.0
    rebalance_timeout_s: float = 10.0
    kill_memory_ms: int = 24 * 3600 * 1000
    max_log_lines: int = 10_000
    trusted_keys: TrustedKeys = field(default_factory=TrustedKeys)
    kafka_options: dict = field(default_factory=dict)

    def client_config(self):
        """The brokers and the operator's raw librdkafka options."""
        config = {"bootstrap.servers": self.brokers}
        config.update(self.kafka_options)
        return config

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


class Executor:
    """A member of its app's consumer group that runs the registered handlers."""

    def __init__(self, brokers, app, trusted_keys=(), **options):
        self.settings = Settings(
            brokers=brokers, app=app, trusted_keys=TrustedKeys(trusted_keys), **options
        )
        self.settings.check()
        if self.settings.executor_id is None:
            suffix = secrets.token_hex(3)
            host = socket.gethostname()
            self.settings.executor_id = f"{app}-{host}-{os.getpid()}-{suffix}"
        self.handlers = {}
        self.stopping = threading.Event()

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
        Loop(self.settings, dict(self.handlers), self.stopping).run()
