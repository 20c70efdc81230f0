//! OpenAPI schemas of the identifiers (feature `openapi`), so that the scheduler's API
//! document describes them as what they accept: a job id is a positive integer, an app name
//! and a trigger id are strings of a given shape. Written by hand rather than derived because
//! each type's serde form is its inner value, checked on the way in.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::{AppName, JobId, TriggerId};

impl PartialSchema for JobId {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1))
            .description(Some("A job's id: a positive integer."))
            .into()
    }
}

impl ToSchema for JobId {}

impl PartialSchema for AppName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[A-Za-z0-9_-]{1,64}$"))
            .description(Some("An executor app's name (XXL-JOB's executor group)."))
            .into()
    }
}

impl ToSchema for AppName {}

impl PartialSchema for TriggerId {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[1-9][0-9]*-[A-Za-z0-9_-]+$"))
            .max_length(Some(128))
            .description(Some(
                "One run's id: `{job_id}-{scheduled_ms}`, with `-{shard}`, `-r{retry}` or \
                 `-u{uuid}` as the run requires.",
            ))
            .into()
    }
}

impl ToSchema for TriggerId {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_describe_what_they_accept() {
        let json = |schema: RefOr<Schema>| serde_json::to_value(schema).unwrap();
        assert_eq!(json(JobId::schema())["minimum"], 1);
        assert_eq!(json(AppName::schema())["pattern"], "^[A-Za-z0-9_-]{1,64}$");
        assert_eq!(json(TriggerId::schema())["maxLength"], 128);
    }
}
