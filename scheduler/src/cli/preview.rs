//! `kadence preview`: the next fires of a schedule, in its time zone, without a server.

use anyhow::Context as _;
use chrono::DateTime;

use super::print::outln;
use crate::domain::schedule::{
    ScheduleSpec, format_in_zone, parse_time_zone, preview, preview_shortfall,
};

/// Prints the `count` fires of a cron or fixed-rate schedule after `from` (RFC 3339, default
/// now), evaluated and shown in `time_zone`, one per line. Fewer fires than asked are followed
/// by a note on standard error saying why; a schedule that never fires is an error (a job
/// cannot be saved with it), so a script sees a failure rather than empty output.
pub(super) fn print_preview(
    cron: Option<String>,
    fix_rate: Option<u32>,
    time_zone: &str,
    from: Option<String>,
    count: usize,
) -> anyhow::Result<()> {
    let schedule = match (cron, fix_rate) {
        (Some(cron), _) => ScheduleSpec::parse("CRON", &cron)?,
        (None, Some(seconds)) => ScheduleSpec::parse("FIX_RATE", &seconds.to_string())?,
        (None, None) => anyhow::bail!("give a schedule: --cron EXPR or --fix-rate SECONDS"),
    };
    let zone = parse_time_zone(time_zone)?;
    let after = match from {
        Some(text) => DateTime::parse_from_rfc3339(&text)
            .with_context(|| format!("--from {text:?} is not an RFC 3339 instant"))?
            .timestamp_millis(),
        None => kadence_schemas::now_ms(),
    };
    let fires = preview(&schedule, zone, after, count);
    for &fire in &fires {
        outln!("{}", format_in_zone(fire, zone))?;
    }
    match preview_shortfall(&schedule, zone, after, &fires, count) {
        Some(why) if fires.is_empty() => anyhow::bail!(why),
        Some(why) => eprintln!("{why}"),
        None => {}
    }
    Ok(())
}
