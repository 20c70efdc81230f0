//! Kadence's cron against Quartz itself: a fixed-seed set of expressions ([`cases`]) in nine
//! zones, started near their clock changes, answered by Quartz 2.3.2 (Debian's
//! `libquartz2-java`, run by `QuartzFires.java` on the JDK: [`quartz`]) and by Kadence. Every
//! case must agree, or differ in a way the allow-list explains ([`allowed`]); and every entry
//! of the allow-list must explain at least one case. `infra/test.sh` installs the package
//! when it is missing and runs this; without Java or Quartz it fails, saying what to install.

mod allowed;
mod cases;
mod quartz;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use allowed::{Allowance, Verdict, verdict};

/// The test command's budget for this test, with room for a loaded machine.
const BUDGET: Duration = Duration::from_secs(60);

#[test]
fn kadence_fires_as_quartz_itself() {
    let started = Instant::now();
    let cases = cases::cases();
    let answers = quartz::answers(&cases);
    let quartz_took = started.elapsed();
    let mut agreed = 0;
    let mut allowed: BTreeMap<Allowance, (usize, String)> = BTreeMap::new();
    let mut unexplained = Vec::new();
    for (case, answer) in cases.iter().zip(&answers) {
        let described = format!(
            "{:?} in {} after {}",
            case.expression, case.zone, case.after_ms
        );
        match verdict(case, answer) {
            Verdict::Agree => agreed += 1,
            Verdict::Allowed(allowances) => {
                for allowance in allowances {
                    let entry = allowed.entry(allowance).or_insert((0, described.clone()));
                    entry.0 += 1;
                }
            }
            Verdict::Unexplained(why) => unexplained.push(format!("{described}: {why}")),
        }
    }
    println!(
        "{} cases ({} expressions), {agreed} agree; Quartz answered in {:.1?}, all in {:.1?}",
        cases.len(),
        cases.len() / 2,
        quartz_took,
        started.elapsed()
    );
    for (allowance, (count, example)) in &allowed {
        println!("  allowed {count:>4}: {allowance:?}, e.g. {example}");
    }
    let shown: Vec<&String> = unexplained.iter().take(40).collect();
    assert!(
        unexplained.is_empty(),
        "{} of {} cases differ from Quartz in a way the allow-list does not explain:\n{}",
        unexplained.len(),
        cases.len(),
        shown
            .iter()
            .map(|line| line.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let unused: Vec<Allowance> = allowed::expected()
        .into_iter()
        .filter(|allowance| !allowed.contains_key(allowance))
        .collect();
    assert!(
        unused.is_empty(),
        "no case needs these allow-list entries: {unused:?}"
    );
    assert!(
        started.elapsed() < BUDGET,
        "the differential test took {:?}, over its budget of {BUDGET:?}",
        started.elapsed()
    );
}
