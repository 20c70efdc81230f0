//! Users, their role and their grants per app: XXL-JOB's `xxl_job_user` made stricter. An
//! `admin` may do everything (users, script jobs included); a `member` only what a grant on
//! an app allows there, and nothing on apps not granted. A disabled user keeps their row and
//! grants but can neither log in nor use a token (see `crate::http::api` `users`).

use kadence_schemas::AppName;
use serde::{Deserialize, Serialize};

use crate::domain::enums::string_enum;

string_enum!(
    /// What a user is in general.
    Role, "role", {
        /// Everything, everywhere: users, every app, script jobs.
        Admin => "ADMIN",
        /// Only what the user's grants allow, app by app.
        Member => "MEMBER",
    }
);

string_enum!(
    /// Whether a user may log in and use their tokens.
    UserStatus, "user status", {
        /// May log in; their tokens work.
        Enabled => "ENABLED",
        /// May not log in; every token of theirs is refused.
        Disabled => "DISABLED",
    }
);

string_enum!(
    /// What a grant allows on one app; each level includes the ones before it.
    Access, "access", {
        /// Read the app's jobs, runs, run logs, executors and reports.
        View => "VIEW",
        /// Also create, edit, start, stop, trigger, kill and delete the app's jobs.
        Operate => "OPERATE",
        /// Also write the source of the app's script jobs (GLUE_*), which runs on its executors.
        Scripts => "SCRIPTS",
    }
);

impl Access {
    /// Whether this grant allows what `needed` allows.
    pub fn allows(self, needed: Access) -> bool {
        self.rank() >= needed.rank()
    }

    fn rank(self) -> u8 {
        match self {
            Access::View => 0,
            Access::Operate => 1,
            Access::Scripts => 2,
        }
    }
}

/// One app a member may use, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AppGrant {
    /// The app.
    pub app: AppName,
    /// What the member may do there.
    pub access: Access,
}

/// A user as the API shows them: never their password or its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct User {
    /// The user's id.
    pub id: i64,
    /// Login name, unique.
    pub name: String,
    /// Admin or member.
    pub role: Role,
    /// A member's apps (an admin needs none).
    pub grants: Vec<AppGrant>,
    /// Created, ms since the epoch.
    pub created_at_ms: i64,
    /// The language chosen for the web console (`en`, `zh-CN`); none: the browser's.
    #[serde(default)]
    pub locale: Option<String>,
    /// Disabled since this instant, ms since the epoch; none while the user may log in.
    #[serde(default)]
    pub disabled_at_ms: Option<i64>,
}

impl User {
    /// Whether the user may log in and use their tokens.
    pub fn status(&self) -> UserStatus {
        match self.disabled_at_ms {
            None => UserStatus::Enabled,
            Some(_) => UserStatus::Disabled,
        }
    }

    /// Whether the user may do what `needed` allows on `app`.
    pub fn may(&self, app: &AppName, needed: Access) -> bool {
        self.role == Role::Admin
            || self
                .grants
                .iter()
                .any(|grant| &grant.app == app && grant.access.allows(needed))
    }
}

string_enum!(
    /// Why a token exists.
    TokenKind, "token kind", {
        /// Issued by a login; ends at logout or expiry.
        Session => "SESSION",
        /// Made by a user for automation, with a name; ends when revoked or expired.
        Api => "API",
    }
);

/// A token as its owner lists it: never the token itself, which is shown once when made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TokenInfo {
    /// The token's id (for revoking it).
    pub id: i64,
    /// Its owner.
    pub user_id: i64,
    /// Session or API token.
    pub kind: TokenKind,
    /// The name its owner gave it (API tokens), or the client that logged in (sessions).
    pub name: String,
    /// Made, ms since the epoch.
    pub created_at_ms: i64,
    /// No longer accepted from this instant, ms since the epoch.
    pub expires_at_ms: i64,
    /// Revoked (logout, or by its owner or an admin), if it was.
    pub revoked_at_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(grants: &[(&str, Access)]) -> User {
        User {
            id: 1,
            name: "ann".into(),
            role: Role::Member,
            grants: grants
                .iter()
                .map(|&(app, access)| AppGrant {
                    app: AppName::parse(app).unwrap(),
                    access,
                })
                .collect(),
            created_at_ms: 0,
            locale: None,
            disabled_at_ms: None,
        }
    }

    #[test]
    fn a_member_may_only_what_a_grant_on_that_app_allows() {
        let billing = AppName::parse("billing").unwrap();
        let reports = AppName::parse("reports").unwrap();
        let ann = member(&[("billing", Access::Operate), ("reports", Access::View)]);
        assert!(ann.may(&billing, Access::View));
        assert!(ann.may(&billing, Access::Operate));
        assert!(
            !ann.may(&billing, Access::Scripts),
            "scripts need their own grant"
        );
        assert!(ann.may(&reports, Access::View));
        assert!(!ann.may(&reports, Access::Operate));
        assert!(!ann.may(&AppName::parse("payroll").unwrap(), Access::View));
        let admin = User {
            role: Role::Admin,
            ..member(&[])
        };
        assert!(admin.may(&billing, Access::Scripts));
    }
}
