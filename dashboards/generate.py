#!/usr/bin/env python3
"""Writes Kadence's Grafana dashboards (dashboards/*.json) from the panel lists below.

The JSON files are what Grafana loads (dashboards/provisioning/ points at this directory);
this script is how they are changed: edit a panel here, run `python3 dashboards/generate.py`,
commit both. The test command checks that the files are this script's output and evaluates
every panel's query against a real Prometheus scraping a scheduler and executors
(tests/e2e/prometheus.rs).

Every dashboard takes its data source as the template variable `datasource` and the apps to
show as `app` (multi-select, from the scheduler's metrics). Queries use `$__rate_interval`.
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
# Every panel shows production: shadow executors (ExecutorBuilder::shadow) carry shadow="true"
# and run copies of the triggers; the shadow diff report is where they are compared.
APP = 'app=~"$app",shadow!="true"'


def panel(title, exprs, unit="short", kind="timeseries", description=""):
    """A panel: `exprs` is a list of (PromQL, legend)."""
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {
                "refId": chr(ord("A") + index),
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "expr": expr,
                "legendFormat": legend,
            }
            for index, (expr, legend) in enumerate(exprs)
        ],
    }


def quantiles(metric, by, selector=APP):
    return [
        (
            f"histogram_quantile({q}, sum by (le, {by}) "
            f"(rate({metric}_bucket{{{selector}}}[$__rate_interval])))",
            f"p{int(q * 100)} {{{{{by}}}}}",
        )
        for q in (0.5, 0.99)
    ]


OVERVIEW = [
    panel("Triggers emitted /s", [(
        f"sum by (app) (rate(kadence_scheduler_triggers_emitted_total{{{APP}}}[$__rate_interval]))",
        "{{app}}")], "ops"),
    panel("Success rate", [(
        f'sum by (app) (rate(kadence_scheduler_results_total{{{APP},code="200"}}[$__rate_interval]))'
        f" / sum by (app) (rate(kadence_scheduler_results_total{{{APP}}}[$__rate_interval]))",
        "{{app}}")], "percentunit"),
    panel("Fire lateness (scheduled → acknowledged)",
          quantiles("kadence_scheduler_fire_lateness_seconds", "app"), "s"),
    panel("Trigger to start (scheduled → handler start)",
          quantiles("kadence_executor_trigger_to_start_seconds", "app"), "s"),
    panel("Failures /s by code", [(
        f'sum by (app, code) (rate(kadence_scheduler_results_total{{{APP},code!="200"}}[$__rate_interval]))',
        "{{app}} {{code}}")], "ops"),
    panel("Dead letters /s", [
        ("sum by (source, reason) (rate(kadence_scheduler_dead_letters_total[$__rate_interval]))",
         "scheduler {{source}} {{reason}}"),
        (f"sum by (app, reason) (rate(kadence_executor_dead_letters_total{{{APP}}}[$__rate_interval]))",
         "executor {{app}} {{reason}}"),
    ], "ops"),
    panel("Live executors", [
        (f"sum by (app) (kadence_scheduler_live_executors{{{APP}}})", "{{app}}")]),
]

SCHEDULER = [
    panel("Pre-read scan duration",
          [(f"histogram_quantile({q}, sum by (le) (rate("
            "kadence_scheduler_pre_read_scan_duration_seconds_bucket[$__rate_interval])))",
            f"p{int(q * 100)}") for q in (0.5, 0.99)], "s"),
    panel("Pre-read slack", [
        ("min by (instance) (kadence_scheduler_pre_read_slack_seconds)", "{{instance}}")], "s",
          description="How long before it is due the earliest fire of the latest scan was "
                      "planned. A scan that keeps up plans 2 s or more ahead with the defaults; "
                      "below 1.5 s (the emit lead and half a scan interval) the node is behind, "
                      "and history (log lines, retention, reports) waits for it."),
    panel("History waiting for scheduling", [
        ("sum by (writer) (rate(kadence_scheduler_history_yield_seconds_total[$__rate_interval]))",
         "{{writer}}")], "percentunit",
          description="Share of the time each history writer waited because scheduling fell "
                      "behind (at most schedule.history_yield per step). Near 1 for long: the "
                      "node is short of database or CPU for its load."),
    panel("Run rows held for their results", [
        ("max by (instance) (kadence_scheduler_run_row_hold_seconds)", "hold {{instance}}")], "s",
          description="How long the row of a run acknowledged now waits for its result before "
                      "it is written: schedule.run_row_hold (2 s on PostgreSQL), plus how far "
                      "the results consumer is behind, at most half the lease. Above the "
                      "configured hold for long: results lag; at half the lease they lag more "
                      "than the hold can cover, and rows are written twice again."),
    panel("Runs held", [
        ("sum by (instance) (kadence_scheduler_held_runs)", "{{instance}}")]),
    panel("Jobs read and fires written per second", [
        ("rate(kadence_scheduler_pre_read_jobs_read_total[$__rate_interval])", "jobs read"),
        ("rate(kadence_scheduler_pre_read_fires_written_total[$__rate_interval])", "fires written"),
    ], "ops"),
    panel("Fires planned /s by source", [(
        f"sum by (source) (rate(kadence_scheduler_fires_planned_total{{{APP}}}[$__rate_interval]))",
        "{{source}}")], "ops"),
    panel("Lease claims and scan failures", [
        ("increase(kadence_scheduler_lease_claims_total[$__rate_interval])", "claims"),
        ("increase(kadence_scheduler_pre_read_failures_total[$__rate_interval])", "scan failures"),
    ]),
    panel("Database reachable, by node", [
        ("min by (instance) (kadence_scheduler_database_reachable)", "{{instance}}")],
        description="1 while the node's database answers its checks (every second), 0 during "
                    "an outage (KadenceDatabaseUnreachable fires after 30 s). No fire is "
                    "planned while it is 0; afterwards the misfire strategies apply."),
    panel("Misfires by strategy", [(
        f"sum by (app, strategy) (increase(kadence_scheduler_misfires_total{{{APP}}}[$__rate_interval]))",
        "{{app}} {{strategy}}")]),
    panel("Duplicate results and lost runs", [
        ("increase(kadence_scheduler_duplicate_results_total[$__rate_interval])", "duplicates"),
        ("increase(kadence_scheduler_lost_runs_total[$__rate_interval])", "lost runs"),
    ]),
    panel("Alarms by outcome", [(
        f"sum by (outcome) (increase(kadence_scheduler_alarms_total{{{APP}}}[$__rate_interval]))",
        "{{outcome}}")]),
    panel("Alarm deliveries by channel", [(
        f"sum by (channel, outcome) (increase(kadence_scheduler_alarm_deliveries_total{{{APP}}}[$__rate_interval]))",
        "{{channel}} {{outcome}}")]),
    panel("Schedule shards owned, by node", [
        ("sum by (instance) (kadence_scheduler_shards_owned)", "{{instance}}"),
        ("max(kadence_scheduler_shards)", "shards in all")],
        description="Each node scans the jobs of the shards it owns. The owned shards of all "
                    "nodes add up to the total except for a lease's length after a node died "
                    "(KadenceShardsUnowned fires if that lasts)."),
    panel("Shards taken and lost", [
        ("sum by (how) (increase(kadence_scheduler_shards_acquired_total[$__rate_interval]))",
         "taken ({{how}})"),
        ("sum(increase(kadence_scheduler_shards_lost_total[$__rate_interval]))", "lost (fenced out)"),
        ("sum(increase(kadence_scheduler_shard_lease_failures_total[$__rate_interval]))",
         "lease step failed")],
        description="free: released by a node that stopped, or never owned; takeover: the "
                    "owner's lease ran out (it died or was cut off); rebalance: taken from a "
                    "node above its share by one below it. A lost shard was taken from a node "
                    "that had not renewed it in time: it writes nothing for it since."),
    panel("Shard takeover gap",
          [("histogram_quantile(0.99, sum by (le) (rate("
            "kadence_scheduler_shard_takeover_gap_seconds_bucket[$__rate_interval])))", "p99"),
           ("max(kadence_scheduler_shard_takeover_gap_seconds_sum / "
            "kadence_scheduler_shard_takeover_gap_seconds_count)", "mean, all time")], "s",
          description="For shards taken over from a dead node: time from its last scan to "
                      "the takeover, about the lease plus a third of it."),
    panel("Scan wait for its shards",
          [(f"histogram_quantile({q}, sum by (le) (rate("
            "kadence_scheduler_schedule_lock_wait_seconds_bucket[$__rate_interval])))",
            f"p{int(q * 100)}") for q in (0.5, 0.99)], "s",
          description="How long a pre-read scan waited for its shards' rows and a connection "
                      "(the metric keeps the name of the schedule lock the shards replaced)."),
    panel("Pending fires (durable, not yet acknowledged)", [
        ("sum by (stage) (kadence_scheduler_pending_fires)", "{{stage}}")],
        description="wheel: planned and waiting for their time; dispatching: sent to the "
                    "broker, awaiting its acknowledgement. Each is also a database row until "
                    "acknowledged, so none is lost if the node dies."),
    panel("Store errors by operation", [(
        "sum by (operation) (increase(kadence_scheduler_store_errors_total[$__rate_interval]))",
        "{{operation}}")]),
    panel("Scheduler consumer lag", [(
        "max by (consumer, partition) (kadence_scheduler_consumer_lag)",
        "{{consumer}} p{{partition}}")],
        description="Results and log records not yet read by the scheduler's own groups."),
]

EXECUTORS = [
    panel("Expected wait of the newest trigger", [(
        f"max by (app, partition) (kadence_executor_expected_wait_seconds{{{APP}}})",
        "{{app}} p{{partition}}")], "s",
        description="Triggers not started ahead of it times the recent mean run duration, over "
                    "the runs going at once: how late the next trigger will start. The "
                    "KadenceWillMissWindow alert fires on it before runs start late."),
    panel("Consumer lag by partition", [(
        f"max by (app, partition) (kadence_executor_consumer_lag{{{APP}}})",
        "{{app}} p{{partition}}")]),
    panel("Running, queued, held", [
        (f"sum by (app) (kadence_executor_running_jobs{{{APP}}})", "running {{app}}"),
        (f"sum by (app) (kadence_executor_queued_jobs{{{APP}}})", "queued {{app}}"),
        (f"sum by (app) (kadence_executor_held_triggers{{{APP}}})", "held {{app}}"),
    ]),
    panel("Run duration by handler",
          quantiles("kadence_executor_run_duration_seconds", "handler"), "s"),
    panel("Outcomes /s", [(
        f"sum by (outcome) (rate(kadence_executor_results_total{{{APP}}}[$__rate_interval]))",
        "{{outcome}}")], "ops"),
    panel("Rebalances and hand-backs", [
        (f"sum by (change) (increase(kadence_executor_rebalances_total{{{APP}}}[$__rate_interval]))",
         "{{change}}"),
        (f"sum (increase(kadence_executor_hand_backs_total{{{APP}}}[$__rate_interval]))",
         "handed back"),
    ]),
    panel("Publish retries", [(
        f"sum by (topic) (increase(kadence_executor_publish_retries_total{{{APP}}}[$__rate_interval]))",
        "{{topic}}")]),
    panel("Control records refused", [(
        f"sum by (app, reason) (increase(kadence_executor_control_refused_total{{{APP}}}[$__rate_interval]))",
        "{{app}} {{reason}}")],
        description="KILL records an executor read and ignored: failing signature verification "
                    "(unsigned, unknown_key, bad_signature, malformed_signature), empty or "
                    "undecodable. Every executor reads every control record, so one forged "
                    "record counts once per executor."),
]

HANDLER = [
    panel("Runs /s by outcome", [(
        f'sum by (outcome) (rate(kadence_executor_results_total{{{APP},handler=~"$handler"}}[$__rate_interval]))',
        "{{outcome}}")], "ops"),
    panel("Run duration",
          quantiles("kadence_executor_run_duration_seconds", "handler",
                    f'{APP},handler=~"$handler"'), "s"),
    panel("Trigger to start",
          quantiles("kadence_executor_trigger_to_start_seconds", "handler",
                    f'{APP},handler=~"$handler"'), "s"),
]


JOB_SELECTOR = f'{APP},job=~"$job"'

JOB = [
    panel("Triggers emitted /s", [(
        f"sum by (job) (rate(kadence_scheduler_job_triggers_emitted_total{{{JOB_SELECTOR}}}[$__rate_interval]))",
        "job {{job}}")], "ops"),
    panel("Results /s by code", [(
        f"sum by (job, code) (rate(kadence_scheduler_job_results_total{{{JOB_SELECTOR}}}[$__rate_interval]))",
        "job {{job}} {{code}}")], "ops"),
    panel("Fire lateness",
          quantiles("kadence_scheduler_job_fire_lateness_seconds", "job", JOB_SELECTOR), "s"),
    panel("Success rate", [(
        f'sum by (job) (rate(kadence_scheduler_job_results_total{{{JOB_SELECTOR},code="200"}}[$__rate_interval]))'
        f" / sum by (job) (rate(kadence_scheduler_job_results_total{{{JOB_SELECTOR}}}[$__rate_interval]))",
        "job {{job}}")], "percentunit",
        description="Only jobs listed in the scheduler's [telemetry] job_metrics have "
                    "series here; a job's full history is its run list."),
]


def variable(name, query, label):
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
    }


def dashboard(uid, title, panels, extra_variables=()):
    for index, item in enumerate(panels):
        item["id"] = index + 1
        item["gridPos"] = {"h": 8, "w": 12, "x": (index % 2) * 12, "y": (index // 2) * 8}
    return {
        "uid": uid,
        "title": title,
        "tags": ["kadence"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource",
             "query": "prometheus"},
            variable("app", "label_values(kadence_scheduler_triggers_emitted_total, app)", "App"),
            *extra_variables,
        ]},
        "panels": panels,
    }


DASHBOARDS = {
    "overview.json": dashboard("kadence-overview", "Kadence: overview", OVERVIEW),
    "scheduler.json": dashboard("kadence-scheduler", "Kadence: scheduler internals", SCHEDULER),
    "executors.json": dashboard("kadence-executors", "Kadence: executors", EXECUTORS),
    "handler.json": dashboard(
        "kadence-handler", "Kadence: one handler", HANDLER,
        [variable("handler", 'label_values(kadence_executor_results_total{app=~"$app"}, handler)',
                  "Handler")],
    ),
    "job.json": dashboard(
        "kadence-job", "Kadence: one job", JOB,
        [variable("job",
                  'label_values(kadence_scheduler_job_triggers_emitted_total{app=~"$app"}, job)',
                  "Job")],
    ),
}


def rendered():
    return {name: json.dumps(board, indent=2) + "\n" for name, board in DASHBOARDS.items()}


def main(argv):
    """Writes the dashboards; with --check, only says (exit 1) which differ from the files."""
    stale = [name for name, text in rendered().items()
             if not (HERE / name).exists() or (HERE / name).read_text() != text]
    if "--check" in argv:
        for name in stale:
            print(f"dashboards/{name} is not generate.py's output: run python3 dashboards/generate.py")
        return 1 if stale else 0
    for name, text in rendered().items():
        (HERE / name).write_text(text)
        print(f"wrote dashboards/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
