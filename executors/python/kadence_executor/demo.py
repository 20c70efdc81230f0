"""The demo executor, with the same interface as the Rust ``test-executor``
(``tests/src/bin/test-executor.rs``), so that the conformance suite drives either the same way.

- Handlers: ``ok`` succeeds; ``sleep`` (params: ms) writes the job log line ``sleeping {ms}
  ms on {executor id}``, then waits that long or until cancelled, then fails with ``stopped
  early`` (the line tells two runs of one trigger apart when they ran on different
  executors); ``fail`` fails with its params as the message (``failed on purpose`` when
  empty); ``log`` (params: ``n`` or ``n:bytes``) writes the job log lines ``line 1`` ...
  ``line n``, or with ``bytes`` each line ``line {i} `` padded with ``x`` to ``bytes`` bytes;
  ``shard`` writes the line ``shard {index} of {total}``; ``noop`` succeeds at once and prints
  nothing (the Rust one is the end-to-end benchmark's handler); ``work`` (params: ``ms:n``)
  writes ``n`` log lines and works ``ms`` after the first, printing nothing (the benchmark's
  handler of a sustained run); ``describe`` writes the line
  ``describing`` and fails with the message ``{production|shadow} run of a {trigger type}
  trigger`` (a failure, because a success carries no message).
- Standard output: ``ready`` once built, then ``started <trigger id>`` as every run begins, and
  ``owns <partitions>`` (ascending, comma separated, ``none`` for none) whenever the group
  assigns or revokes partitions.
- SIGTERM and SIGINT stop it gracefully (exit code 0).

Environment: ``KADENCE_BROKERS``, ``KADENCE_APP``, ``KADENCE_TOPIC_PREFIX``,
``KADENCE_EXECUTOR_ID``; optional ``KADENCE_SESSION_TIMEOUT_MS`` (default 6000),
``KADENCE_REBALANCE_TIMEOUT_MS`` (the hand-back wait, default half the session timeout),
``KADENCE_BEAT_INTERVAL_MS`` (default 3000), ``KADENCE_DRAIN_TIMEOUT_MS`` (how long a
graceful stop waits for running runs, default 30000), ``KADENCE_TRUSTED_KEYS`` (scheduler public
keys, comma separated; required unless ``KADENCE_ALLOW_UNVERIFIED`` is ``1`` or ``true``,
which with no key verifies nothing), ``KADENCE_EXECUTOR_KEY`` (the app's executor key,
``{key id}.{secret}``, that signs every record the executor writes; required unless
``KADENCE_ALLOW_UNSIGNED`` is ``1`` or ``true``, which with no key signs nothing; set but
malformed, it stops the demo however ``KADENCE_ALLOW_UNSIGNED`` is set), ``KADENCE_SHADOW``
(``1`` or ``true``: a shadow executor) and ``KADENCE_GROUP_PROTOCOL`` (``classic``, the
default, also when empty, or ``consumer``: Kafka's KIP-848 group protocol, whose session and
heartbeat are the broker's) and ``KADENCE_BROKER_KIND`` (``kafka``, the default, also when
empty, or ``tansu``).
"""

import logging
import os
import sys
import threading

from . import Executor, JobFailed
from .executor import BROKER_KINDS, GROUP_PROTOCOLS


# Handlers run in threads of their own: one line at a time, never two interleaved.
_STDOUT = threading.Lock()


def announce(ctx):
    with _STDOUT:
        sys.stdout.write(f"started {ctx.trigger_id}\n")
        sys.stdout.flush()


def ok(ctx):
    announce(ctx)


def noop(ctx):
    pass


def sleep_on(executor_id):
    """The ``sleep`` handler of the executor `executor_id`."""

    def sleep(ctx):
        announce(ctx)
        millis = int(ctx.params.strip())
        ctx.log(f"sleeping {millis} ms on {executor_id}")
        if ctx.cancelled.wait(millis / 1000):
            raise JobFailed("stopped early")

    return sleep


def fail(ctx):
    announce(ctx)
    raise JobFailed(ctx.params or "failed on purpose")


def log(ctx):
    announce(ctx)
    lines, _, size = ctx.params.strip().partition(":")
    for number in range(1, int(lines) + 1):
        ctx.log(f"line {number} ".ljust(int(size), "x") if size else f"line {number}")


def work(ctx):
    """Works ``ms`` (params ``ms:n``) and writes ``n`` log lines, the first at its start, as an
    application's handler does; prints nothing (the end-to-end benchmark's handler)."""
    millis, colon, lines = ctx.params.strip().partition(":")
    if not colon:
        raise JobFailed("params: SLEEP_MS:LINES")
    millis, lines = int(millis), int(lines)
    if lines > 0:
        ctx.log(f"working, line 1 of {lines}")
    if ctx.cancelled.wait(millis / 1000):
        raise JobFailed("stopped early")
    for number in range(2, lines + 1):
        ctx.log(f"working, line {number} of {lines}")


def shard(ctx):
    announce(ctx)
    ctx.log(f"shard {ctx.shard_index} of {ctx.shard_total}")


def describe(ctx):
    announce(ctx)
    ctx.log("describing")
    executor = "shadow" if ctx.shadow else "production"
    raise JobFailed(f"{executor} run of a {ctx.trigger_type} trigger")


def announce_partitions(owned):
    with _STDOUT:
        sys.stdout.write(f"owns {','.join(map(str, owned)) or 'none'}\n")
        sys.stdout.flush()


def flag(env, name):
    value = env.get(name, "")
    if value not in ("", "0", "false", "1", "true"):
        sys.exit(f"{name} must be 1, true, 0 or false, not {value!r}")
    return value in ("1", "true")


def group_protocol(env):
    value = env.get("KADENCE_GROUP_PROTOCOL") or "classic"
    if value not in GROUP_PROTOCOLS:
        sys.exit(f"KADENCE_GROUP_PROTOCOL must be classic or consumer, not {value!r}")
    return value


def broker_kind(env):
    value = (env.get("KADENCE_BROKER_KIND") or "kafka").lower()
    if value not in BROKER_KINDS:
        sys.exit(f"KADENCE_BROKER_KIND must be kafka or tansu, not {value!r}")
    return value


def executor_from(env):
    """The demo executor the environment describes, its handlers registered; exits saying
    what is wrong with the environment, raises ValueError for what ``Executor`` refuses."""

    def required(name):
        if name not in env:
            sys.exit(f"{name} is required")
        return env[name]

    keys = [key for key in env.get("KADENCE_TRUSTED_KEYS", "").split(",") if key.strip()]
    session_timeout_ms = int(env.get("KADENCE_SESSION_TIMEOUT_MS", "6000"))
    executor = Executor(
        brokers=required("KADENCE_BROKERS"),
        app=required("KADENCE_APP"),
        topic_prefix=required("KADENCE_TOPIC_PREFIX"),
        executor_id=required("KADENCE_EXECUTOR_ID"),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_s=int(
            env.get("KADENCE_REBALANCE_TIMEOUT_MS", str(session_timeout_ms // 2))
        ) / 1000,
        beat_interval_s=int(env.get("KADENCE_BEAT_INTERVAL_MS", "3000")) / 1000,
        drain_timeout_s=int(env.get("KADENCE_DRAIN_TIMEOUT_MS", "30000")) / 1000,
        trusted_keys=keys,
        shadow=flag(env, "KADENCE_SHADOW"),
        group_protocol=group_protocol(env),
        broker_kind=broker_kind(env),
        allow_unverified=flag(env, "KADENCE_ALLOW_UNVERIFIED"),
        executor_key=env.get("KADENCE_EXECUTOR_KEY", "").strip() or None,
        allow_unsigned=flag(env, "KADENCE_ALLOW_UNSIGNED"),
    )
    handlers = (
        ("ok", ok), ("noop", noop), ("sleep", sleep_on(executor.settings.executor_id)),
        ("fail", fail), ("log", log), ("work", work),
        ("shard", shard), ("describe", describe),
    )
    for name, function in handlers:
        executor.handler(name, function)
    return executor


def main():
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    executor = executor_from(os.environ)
    executor.on_partitions(announce_partitions)
    print("ready", flush=True)
    executor.run()


if __name__ == "__main__":
    main()
