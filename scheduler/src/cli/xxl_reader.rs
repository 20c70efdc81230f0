//! Reads an XXL-JOB database into an [`XxlSnapshot`], read-only: one `START TRANSACTION WITH
//! CONSISTENT SNAPSHOT, READ ONLY` (the server refuses any write inside it, and every table
//! is read as of one instant), rolled back at the end. Passwords and login tokens are never
//! selected.
//!
//! Columns are found through `information_schema`, so one reader serves every version:
//! XXL-JOB 2.0–2.2 (`job_cron`, no schedule type), 2.3–3.4 (`title`, `job_desc`) and 3.5
//! (`name` for both, `access_token` per group).

use std::collections::{HashMap, HashSet};

use anyhow::Context as _;
use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::{Connection as _, Executor as _, Row as _};

use crate::operations::import::{XxlGlueVersion, XxlGroup, XxlJob, XxlSnapshot, XxlUser};

/// The tables read.
const TABLES: [&str; 4] = [
    "xxl_job_group",
    "xxl_job_info",
    "xxl_job_logglue",
    "xxl_job_user",
];

/// Script versions sent per job, as XXL-JOB keeps them (the count of all is sent too).
const VERSIONS_SENT: usize = crate::operations::import::planned::GLUE_VERSIONS_KEPT;

/// Reads the XXL-JOB database at `url` (`mysql://user:password@host:port/database`).
pub(super) async fn read_snapshot(url: &str) -> anyhow::Result<XxlSnapshot> {
    let mut connection = MySqlConnection::connect(url)
        .await
        .context("connecting to the XXL-JOB database (give its URL with --from mysql://user:password@host:3306/xxl_job)")?;
    connection
        .execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await
        .context("starting a read-only transaction")?;
    let read = read_tables(&mut connection).await;
    // Nothing was written; the rollback only ends the transaction.
    let _ = connection.execute("ROLLBACK").await;
    let _ = connection.close().await;
    read
}

async fn read_tables(connection: &mut MySqlConnection) -> anyhow::Result<XxlSnapshot> {
    let columns = columns(connection).await?;
    for table in TABLES {
        if !columns.contains_key(table) {
            anyhow::bail!(
                "table {table} is missing: this is not an XXL-JOB database (or the user may not \
                 read it)"
            );
        }
    }
    let has = |table: &str, column: &str| columns[table].contains(column);
    let groups = read_groups(connection, &has).await?;
    let mut jobs = read_jobs(connection, &has).await?;
    let (glue_versions, totals) = read_glue_versions(connection).await?;
    for job in &mut jobs {
        job.glue_versions_total = totals.get(&job.id).copied().unwrap_or_default();
    }
    let users = read_users(connection).await?;
    Ok(XxlSnapshot {
        groups,
        jobs,
        glue_versions,
        users,
    })
}

/// The columns of the XXL-JOB tables present, by table.
async fn columns(
    connection: &mut MySqlConnection,
) -> anyhow::Result<HashMap<String, HashSet<String>>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT CAST(table_name AS CHAR), CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name LIKE 'xxl\\_job\\_%'",
    )
    .fetch_all(&mut *connection)
    .await
    .context("listing XXL-JOB's tables (information_schema.columns)")?;
    let mut columns: HashMap<String, HashSet<String>> = HashMap::new();
    for (table, column) in rows {
        columns
            .entry(table.to_ascii_lowercase())
            .or_default()
            .insert(column.to_ascii_lowercase());
    }
    Ok(columns)
}

/// `column` if `table` has it, else `fallback` (an SQL expression).
fn either(has: &dyn Fn(&str, &str) -> bool, table: &str, column: &str, fallback: &str) -> String {
    if has(table, column) {
        format!("`{column}`")
    } else {
        fallback.to_owned()
    }
}

fn text(row: &MySqlRow, index: usize) -> anyhow::Result<Option<String>> {
    row.try_get::<Option<String>, _>(index)
        .with_context(|| format!("reading column {index}"))
}

fn number(row: &MySqlRow, index: usize) -> anyhow::Result<i64> {
    Ok(row
        .try_get::<Option<i64>, _>(index)
        .with_context(|| format!("reading column {index}"))?
        .unwrap_or_default())
}

async fn read_groups(
    connection: &mut MySqlConnection,
    has: &dyn Fn(&str, &str) -> bool,
) -> anyhow::Result<Vec<XxlGroup>> {
    let title = either(has, "xxl_job_group", "title", "`name`");
    let token = if has("xxl_job_group", "access_token") {
        "CAST(COALESCE(`access_token`, '') <> '' AS SIGNED)"
    } else {
        "0"
    };
    let sql = format!(
        "SELECT CAST(`id` AS SIGNED), `app_name`, {title}, CAST(`address_type` AS SIGNED), \
         `address_list`, {token} FROM `xxl_job_group` ORDER BY `id`"
    );
    let rows = sqlx::query(&sql)
        .fetch_all(&mut *connection)
        .await
        .context("reading xxl_job_group")?;
    rows.iter()
        .map(|row| {
            Ok(XxlGroup {
                id: number(row, 0)?,
                app_name: text(row, 1)?.unwrap_or_default(),
                title: text(row, 2)?.unwrap_or_default(),
                address_type: number(row, 3)?,
                address_list: text(row, 4)?,
                has_access_token: number(row, 5)? != 0,
            })
        })
        .collect()
}

async fn read_jobs(
    connection: &mut MySqlConnection,
    has: &dyn Fn(&str, &str) -> bool,
) -> anyhow::Result<Vec<XxlJob>> {
    const T: &str = "xxl_job_info";
    let desc = either(has, T, "job_desc", "`name`");
    // Before 2.3 a job had only a cron expression.
    let schedule_type = either(has, T, "schedule_type", "'CRON'");
    let schedule_conf = either(has, T, "schedule_conf", "`job_cron`");
    let misfire = either(has, T, "misfire_strategy", "NULL");
    let sql = format!(
        "SELECT CAST(`id` AS SIGNED), CAST(`job_group` AS SIGNED), {desc}, `author`, \
         `alarm_email`, {schedule_type}, {schedule_conf}, {misfire}, `executor_route_strategy`, \
         `executor_handler`, `executor_param`, `executor_block_strategy`, \
         CAST(`executor_timeout` AS SIGNED), CAST(`executor_fail_retry_count` AS SIGNED), \
         `glue_type`, `glue_source`, `glue_remark`, \
         DATE_FORMAT(`glue_updatetime`, '%Y-%m-%d %H:%i:%s'), `child_jobid`, \
         CAST(`trigger_status` AS SIGNED) FROM `{T}` ORDER BY `id`"
    );
    let rows = sqlx::query(&sql)
        .fetch_all(&mut *connection)
        .await
        .context("reading xxl_job_info")?;
    rows.iter().map(job_of).collect()
}

fn job_of(row: &MySqlRow) -> anyhow::Result<XxlJob> {
    Ok(XxlJob {
        id: number(row, 0)?,
        job_group: number(row, 1)?,
        job_desc: text(row, 2)?.unwrap_or_default(),
        author: text(row, 3)?,
        alarm_email: text(row, 4)?,
        schedule_type: text(row, 5)?,
        schedule_conf: text(row, 6)?,
        misfire_strategy: text(row, 7)?,
        executor_route_strategy: text(row, 8)?,
        executor_handler: text(row, 9)?,
        executor_param: text(row, 10)?,
        executor_block_strategy: text(row, 11)?,
        executor_timeout: number(row, 12)?,
        executor_fail_retry_count: number(row, 13)?,
        glue_type: text(row, 14)?,
        glue_source: text(row, 15)?,
        glue_remark: text(row, 16)?,
        glue_updatetime: text(row, 17)?,
        child_jobid: text(row, 18)?,
        trigger_status: number(row, 19)?,
        glue_versions_total: 0,
    })
}

/// The newest [`VERSIONS_SENT`] script versions of each job, and how many each job has.
async fn read_glue_versions(
    connection: &mut MySqlConnection,
) -> anyhow::Result<(Vec<XxlGlueVersion>, HashMap<i64, i64>)> {
    let rows = sqlx::query(
        "SELECT CAST(`id` AS SIGNED), CAST(`job_id` AS SIGNED), `glue_type`, `glue_source`, \
         `glue_remark`, DATE_FORMAT(`add_time`, '%Y-%m-%d %H:%i:%s') FROM `xxl_job_logglue` \
         ORDER BY `job_id`, `id` DESC",
    )
    .fetch_all(&mut *connection)
    .await
    .context("reading xxl_job_logglue")?;
    let mut totals: HashMap<i64, i64> = HashMap::new();
    let mut versions = Vec::new();
    for row in &rows {
        let job_id = number(row, 1)?;
        let seen = totals.entry(job_id).or_default();
        *seen += 1;
        if *seen as usize > VERSIONS_SENT {
            continue;
        }
        versions.push(XxlGlueVersion {
            id: number(row, 0)?,
            job_id,
            glue_type: text(row, 2)?,
            glue_source: text(row, 3)?,
            glue_remark: text(row, 4)?.unwrap_or_default(),
            add_time: text(row, 5)?,
        });
    }
    Ok((versions, totals))
}

async fn read_users(connection: &mut MySqlConnection) -> anyhow::Result<Vec<XxlUser>> {
    // Never `password` nor `token`.
    let rows = sqlx::query(
        "SELECT CAST(`id` AS SIGNED), `username`, CAST(`role` AS SIGNED), `permission` \
         FROM `xxl_job_user` ORDER BY `id`",
    )
    .fetch_all(&mut *connection)
    .await
    .context("reading xxl_job_user")?;
    rows.iter()
        .map(|row| {
            Ok(XxlUser {
                id: number(row, 0)?,
                username: text(row, 1)?.unwrap_or_default(),
                role: number(row, 2)?,
                permission: text(row, 3)?,
            })
        })
        .collect()
}
