//! What signing costs per record: signatures and verifications per second on one core, for a
//! trigger-sized value (the throughput benchmark's records are 67 bytes; real ones with
//! params are a few hundred). Prints numbers; `cargo bench -p kadence-kafka --bench signing`.

use std::time::{Duration, Instant};

use kadence_kafka::{PublicKey, RecordSigner, TrustedKeys};
use rdkafka::Timestamp;
use rdkafka::message::OwnedMessage;

const TOPIC: &str = "kadence.triggers.billing";

/// Runs `step` for about `span`; returns how many times per second it ran.
fn rate(span: Duration, mut step: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < span {
        for _ in 0..100 {
            step();
        }
        done += 100;
    }
    done as f64 / start.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let signer = RecordSigner::generate()?;
    let trusted = TrustedKeys::new([PublicKey::parse(&signer.public_key().to_base64())?]);
    println!("value bytes | signatures/s (one core) | verifications/s (one core)");
    for size in [67usize, 300, 2_000] {
        let value = vec![7u8; size];
        let signed = rate(Duration::from_secs(2), || {
            std::hint::black_box(signer.headers(TOPIC, std::hint::black_box(&value)));
        });
        let message = OwnedMessage::new(
            Some(value.clone()),
            None,
            TOPIC.to_owned(),
            Timestamp::NotAvailable,
            0,
            0,
            Some(signer.headers(TOPIC, &value)),
        );
        let verified = rate(Duration::from_secs(2), || {
            let key = trusted.verify_message(std::hint::black_box(&message));
            assert!(key.is_ok());
        });
        println!("{size:>11} | {signed:>23.0} | {verified:>26.0}");
    }
    Ok(())
}
