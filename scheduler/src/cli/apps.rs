//! `kadence app add|list`: the executor apps (XXL-JOB's executor groups) and their trigger
//! topics' partition counts.

use super::args::AppCommand;
use super::client::ApiClient;
use super::print::outln;
use crate::domain::model::App;
use crate::http::api::NewAppRequest;

/// Runs an `app` subcommand against the API.
pub(super) async fn app_command(client: &ApiClient, command: AppCommand) -> anyhow::Result<()> {
    match command {
        AppCommand::Add {
            name,
            partitions,
            title,
        } => {
            let request = NewAppRequest {
                name,
                partitions,
                title,
            };
            let app: App = client.post("/api/apps", &request).await?;
            outln!(
                "created app {} with {} partitions",
                app.name,
                app.partitions
            )?;
        }
        AppCommand::List => {
            let apps: Vec<App> = client.all("/api/apps", &[]).await?;
            outln!("{:<24} {:>10}  TITLE", "APP", "PARTITIONS")?;
            for app in apps {
                outln!("{:<24} {:>10}  {}", app.name, app.partitions, app.title)?;
            }
        }
    }
    Ok(())
}
