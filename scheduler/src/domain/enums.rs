//! Enumerations users type (strategies, statuses, schedule types): the [`string_enum!`] macro
//! that gives each its one spelling, parsing and serde, and the [`ModelError`] an unknown value
//! becomes, listing the accepted values. A leaf module: the model and the schedule both build
//! their enums here, so neither imports the other for it.

/// A value a user supplied that the model cannot accept.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// An enumeration received a value outside its set.
    #[error("unknown {kind} {value:?}: expected one of {expected}")]
    UnknownValue {
        /// What was being parsed, e.g. "route strategy".
        kind: &'static str,
        /// The rejected input.
        value: String,
        /// The accepted spellings, comma separated.
        expected: &'static str,
    },
}

/// Implements `FromStr`, `Display`, `as_str` and string serde for a plain enumeration whose
/// spelling is its SCREAMING_SNAKE_CASE name.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal, { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order (the CLI lists them in `--help`).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Every accepted spelling, comma separated (used in error messages).
            pub const EXPECTED: &'static str = concat!($($text, ", "),+);

            /// The canonical spelling, as stored and as shown.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::domain::enums::ModelError;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                match value.trim().to_ascii_uppercase().as_str() {
                    $($text => Ok(Self::$variant),)+
                    _ => Err($crate::domain::enums::ModelError::UnknownValue {
                        kind: $kind,
                        value: value.to_owned(),
                        expected: Self::EXPECTED.trim_end_matches(", "),
                    }),
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::domain::enums::ModelError;
            fn try_from(value: String) -> Result<Self, Self::Error> { value.parse() }
        }

        // The API document lists the canonical spellings (parsing also takes other cases).
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl From<$name> for String {
            fn from(value: $name) -> String { value.as_str().to_owned() }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(self.as_str()) }
        }
    };
}
pub(crate) use string_enum;
