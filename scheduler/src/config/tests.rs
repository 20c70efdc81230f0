//! Loading the configuration: file, then environment; unknown fields refused.

// figment's `Jail` closures return `figment::Error`, which is large; that is its API.
#![allow(clippy::result_large_err)]

use super::*;
use std::time::Duration;

use kadence_kafka::settings::BrokerKind;
use secrecy::ExposeSecret;

#[test]
fn file_then_environment_with_typed_durations() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "kadence.toml",
            r#"
            [database]
            url = "postgres://kadence:hunter2@db/kadence"
            [schedule]
            pre_read_window = "3s"
            batch_size = 50
            "#,
        )?;
        jail.set_env("KADENCE_KAFKA__BROKERS", "b1:9092,b2:9092");
        jail.set_env("KADENCE_SCHEDULE__LEASE", "1m");
        jail.set_env("KADENCE_SIGNING__KEY_REFRESH_INTERVAL", "2s");
        jail.set_env("KADENCE_API_URL", "http://ignored"); // the CLI's, not a setting
        let config = Config::load(Some(Path::new("kadence.toml"))).expect("loads");
        assert_eq!(config.schedule.pre_read_window, Duration::from_secs(3));
        assert_eq!(config.schedule.batch_size, 50);
        assert_eq!(config.schedule.lease, Duration::from_secs(60));
        assert_eq!(config.signing.key_refresh_interval, Duration::from_secs(2));
        assert_eq!(config.kafka.brokers, "b1:9092,b2:9092");
        assert_eq!(config.kafka.topic_prefix, "kadence");
        assert!(
            config
                .database
                .url
                .expose_secret()
                .starts_with("postgres://")
        );
        assert!(
            !format!("{config:?}").contains("hunter2"),
            "secrets never in Debug"
        );
        Ok(())
    });
}

#[test]
fn the_broker_kind_is_kafka_unless_it_says_tansu() {
    figment::Jail::expect_with(|jail| {
        assert_eq!(
            Config::load(None).unwrap().kafka.broker_kind,
            BrokerKind::Kafka
        );
        jail.set_env("KADENCE_KAFKA__BROKER_KIND", "tansu");
        assert_eq!(
            Config::load(None).unwrap().kafka.broker_kind,
            BrokerKind::Tansu
        );
        jail.set_env("KADENCE_KAFKA__BROKER_KIND", "redpanda");
        let error = Config::load(None).unwrap_err();
        assert!(error.to_string().contains("redpanda"), "{error}");
        Ok(())
    });
}

#[test]
fn unknown_fields_are_refused() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("kadence.toml", "[schedule]\npre_read_windw = \"3s\"\n")?;
        let error = Config::load(Some(Path::new("kadence.toml"))).unwrap_err();
        assert!(error.to_string().contains("pre_read_windw"), "{error}");
        Ok(())
    });
}

#[test]
fn signing_threads_default_to_one_per_core_and_zero_is_refused() {
    figment::Jail::expect_with(|jail| {
        let defaults = Config::load(None).expect("defaults load");
        assert_eq!(
            defaults.signing.signing_threads(),
            std::thread::available_parallelism().unwrap()
        );
        jail.set_env("KADENCE_SIGNING__THREADS", "3");
        let config = Config::load(None).expect("loads");
        assert_eq!(config.signing.signing_threads().get(), 3);
        jail.set_env("KADENCE_SIGNING__THREADS", "0");
        let error = Config::load(None).unwrap_err();
        let message = error.to_string();
        assert!(
            message.to_lowercase().contains("signing.threads"),
            "{message}"
        );
        assert!(message.contains("nonzero"), "{message}");
        Ok(())
    });
}

#[test]
fn triggers_are_valid_for_an_hour_unless_configured_and_zero_means_no_window() {
    figment::Jail::expect_with(|jail| {
        let signing = Config::load(None).unwrap().signing;
        assert_eq!(signing.trigger_validity(), Some(Duration::from_secs(3_600)));
        jail.set_env("KADENCE_SIGNING__TRIGGER_VALIDITY", "15m");
        let signing = Config::load(None).unwrap().signing;
        assert_eq!(signing.trigger_validity(), Some(Duration::from_secs(900)));
        jail.set_env("KADENCE_SIGNING__TRIGGER_VALIDITY", "0s");
        assert_eq!(Config::load(None).unwrap().signing.trigger_validity(), None);
        Ok(())
    });
}

#[test]
fn run_rows_are_held_on_postgres_two_seconds_or_half_the_lease_unless_configured() {
    figment::Jail::expect_with(|jail| {
        let seconds = Duration::from_secs;
        let schedule = Config::load(None).unwrap().schedule;
        assert_eq!(schedule.run_row_hold(true), seconds(2));
        assert_eq!(
            schedule.run_row_hold(false),
            Duration::ZERO,
            "SQLite, MySQL"
        );
        jail.set_env("KADENCE_SCHEDULE__LEASE", "2s");
        let schedule = Config::load(None).unwrap().schedule;
        assert_eq!(
            schedule.run_row_hold(true),
            seconds(1),
            "half a short lease"
        );
        jail.set_env("KADENCE_SCHEDULE__RUN_ROW_HOLD", "0s");
        let schedule = Config::load(None).unwrap().schedule;
        assert_eq!(schedule.run_row_hold(true), Duration::ZERO, "off");
        jail.set_env("KADENCE_SCHEDULE__RUN_ROW_HOLD", "1500ms");
        let schedule = Config::load(None).unwrap().schedule;
        assert_eq!(schedule.run_row_hold(false), Duration::from_millis(1_500));
        let refused = schedule.check_run_row_hold().unwrap_err();
        assert!(
            refused.to_string().contains("schedule.run_row_hold"),
            "over half of the lease is refused: {refused}"
        );
        jail.set_env("KADENCE_SCHEDULE__RUN_ROW_HOLD", "1s");
        assert!(
            Config::load(None)
                .unwrap()
                .schedule
                .check_run_row_hold()
                .is_ok()
        );
        jail.set_env("KADENCE_DATABASE__URL", "postgresql://kadence@db/kadence");
        assert!(Config::load(None).unwrap().database.is_postgres());
        jail.set_env("KADENCE_DATABASE__URL", "sqlite://kadence.db");
        assert!(!Config::load(None).unwrap().database.is_postgres());
        Ok(())
    });
}

#[test]
fn fires_are_released_in_rounds_of_a_quarter_of_the_lead_unless_configured() {
    figment::Jail::expect_with(|jail| {
        let millis = Duration::from_millis;
        let round = || Config::load(None).unwrap().schedule.release_round();
        assert_eq!(round(), millis(250), "the default lead");
        jail.set_env("KADENCE_SCHEDULE__EMIT_LEAD", "400ms");
        assert_eq!(round(), millis(100));
        jail.set_env("KADENCE_SCHEDULE__EMIT_LEAD", "0s");
        assert_eq!(round(), millis(20), "no lead: how late a trigger may leave");
        jail.set_env("KADENCE_SCHEDULE__EMIT_LEAD", "10s");
        assert_eq!(round(), millis(250), "at most a quarter of a second");
        jail.set_env("KADENCE_SCHEDULE__RELEASE_ROUND", "1ms");
        assert_eq!(round(), millis(1), "configured");
        Ok(())
    });
}
