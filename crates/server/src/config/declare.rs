//! What one declaration of a setting becomes: the [`settings!`] macro, and the small
//! pieces of code its expansion calls.
//!
//! The macro is `macro_rules!` rather than a derive of our own because a derive would need a
//! proc-macro crate for one struct; and it expands to clap's and serde's own derives, so
//! parsing, environment variables, help and the file's errors stay theirs.

use super::LogFormat;
use crate::control::cors::AllowedOrigins;
use clap::ValueEnum;
use gsrelay_core::rtp::SrtpProfile;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// One setting as the configuration reference (`docs/configuration.md`) lists it: what
/// its declaration says, with the flag and variable read back from the command line
/// clap built of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The key in the file as the reference writes it: `http_addr`, or
    /// `[relay] object_ttl` for a key of a table; `None` for `--config`, which names the
    /// file.
    pub key: Option<String>,
    /// The flag, `--http-addr`; `--insecure-plain-rtp[=BOOL]` when its value may be left
    /// out. `None`: the file alone sets it.
    pub flag: Option<String>,
    /// The environment variable, `GSRELAY_HTTP_ADDR`; `None`: the file alone sets it.
    pub env: Option<String>,
    /// The built-in default.
    pub default: SettingDefault,
    /// What the setting does: the flag's help without its default.
    pub help: String,
}

/// A setting's built-in default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingDefault {
    /// A value, as the file writes it (`0.0.0.0:8080`, `0.5`, `["*"]`).
    Value(String),
    /// No value: what happens instead (`the bound address`); Markdown.
    Unset(String),
}

impl SettingDefault {
    /// The default of a setting whose built-in value is `value`; `unset` says what a
    /// setting with no value does instead (`none` when not said).
    pub(crate) fn of(value: &impl Documented, unset: Option<&str>) -> Self {
        let value = value.documented();
        debug_assert!(
            value.is_none() || unset.is_none(),
            "`unset` describes a setting with no default value, not {value:?}"
        );
        match value {
            Some(v) => Self::Value(v),
            None => Self::Unset(unset.unwrap_or("none").to_owned()),
        }
    }
}

impl fmt::Display for SettingDefault {
    /// As `--help` shows it: plain text, without the reference's Markdown code marks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(v) => f.write_str(v),
            Self::Unset(what) => f.write_str(&what.replace('`', "")),
        }
    }
}

/// A declaration's doc comment as one line of help: its lines joined, without the
/// Markdown code marks a terminal would show as they are.
pub(crate) fn doc_text(doc: &str) -> String {
    doc.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('`', "")
}

/// A flag's help: what the setting does, then its default.
pub(crate) fn help(doc: &str, default: &SettingDefault) -> String {
    format!("{} [default: {default}]", doc_text(doc))
}

/// A setting's value as the reference and `--help` write its default: as the file spells
/// it, or `None` when the setting has no value until given one. A type a setting may have
/// implements it, so that a new setting cannot show a default the file would not accept.
pub(crate) trait Documented {
    /// The value as the file spells it (strings without their quotes), `None` for none.
    fn documented(&self) -> Option<String>;
}

/// Types whose `Display` is how the file spells them.
macro_rules! documented_by_display {
    ($($t:ty),*) => {$(
        impl Documented for $t {
            fn documented(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}

documented_by_display!(SocketAddr, bool, u32, u64, usize, f64, String);

impl Documented for Duration {
    /// Seconds, the unit of every duration in the file (`0.5`, `30`).
    fn documented(&self) -> Option<String> {
        Some(self.as_secs_f64().to_string())
    }
}

impl Documented for PathBuf {
    fn documented(&self) -> Option<String> {
        Some(self.display().to_string())
    }
}

impl Documented for SrtpProfile {
    fn documented(&self) -> Option<String> {
        Some(self.name().to_owned())
    }
}

impl Documented for LogFormat {
    fn documented(&self) -> Option<String> {
        self.to_possible_value().map(|v| v.get_name().to_owned())
    }
}

impl<T: Documented> Documented for Option<T> {
    fn documented(&self) -> Option<String> {
        self.as_ref().and_then(T::documented)
    }
}

impl Documented for Vec<String> {
    /// An empty list is no value (`none`); a list, as TOML (and JSON) writes it.
    fn documented(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(self).unwrap_or_default())
    }
}

impl Documented for AllowedOrigins {
    /// As TOML (and JSON) writes the list: `["*"]`.
    fn documented(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }
}

/// How [`joined`] writes a setting's name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    /// A variable's: upper case (`GSRELAY_HTTP_ADDR`).
    Upper,
    /// A flag's: `-` for `_` (`http-addr`).
    Dash,
}

/// `prefix` then `name` in `case`: a flag's or variable's name built from a setting's
/// name at compile time, since clap takes `&'static str` names (allocating one needs its
/// `string` feature) and `macro_rules!` cannot change an identifier's case. `N` is the
/// two lengths' sum.
pub(crate) const fn joined<const N: usize>(prefix: &str, name: &str, case: Case) -> [u8; N] {
    let (prefix, name) = (prefix.as_bytes(), name.as_bytes());
    assert!(prefix.len() + name.len() == N);
    let mut out = [0; N];
    let mut i = 0;
    while i < N {
        let b = if i < prefix.len() {
            prefix[i]
        } else {
            name[i - prefix.len()]
        };
        out[i] = match case {
            Case::Upper => b.to_ascii_uppercase(),
            Case::Dash if b == b'_' => b'-',
            Case::Dash => b,
        };
        i += 1;
    }
    out
}

/// [`joined`] as a `&'static str`: `name!("GSRELAY_", "http_addr", Upper)` is
/// `"GSRELAY_HTTP_ADDR"`, `name!("http_", "rate_burst", Dash)` is `"http-rate-burst"`.
macro_rules! name {
    ($prefix:expr, $name:expr, $case:ident) => {{
        use $crate::config::declare::{Case, joined};
        const PREFIX: &str = $prefix;
        const NAME: &str = $name;
        const BYTES: [u8; PREFIX.len() + NAME.len()] = joined(PREFIX, NAME, Case::$case);
        const JOINED: &str = match ::core::str::from_utf8(&BYTES) {
            Ok(s) => s,
            Err(_) => panic!("a setting's name is ASCII"),
        };
        JOINED
    }};
}

/// The type of a top-level setting's field: its declared type, or an `Option` of it when
/// it has no default value.
macro_rules! field_type {
    ($ty:ty) => { Option<$ty> };
    ($ty:ty, $default:expr) => { $ty };
}

/// The default of a top-level setting's field: its declared default, or `None`.
macro_rules! field_default {
    () => {
        None
    };
    ($default:expr) => {
        $default
    };
}

/// A flag's value as the field holds it: as it is, or in `Some` for a setting with no
/// default value.
macro_rules! field_value {
    ($value:expr) => {
        Some($value)
    };
    ($value:expr, $default:expr) => {
        $value
    };
}

/// `Some` of the expression given, else `None`.
macro_rules! maybe {
    () => {
        None
    };
    ($x:expr) => {
        Some($x)
    };
}

/// The clap id (and so the flag) of a table's key, `None` for a key the file alone sets.
macro_rules! table_flag {
    ($prefix:literal, $key:ident) => {
        None
    };
    ($prefix:literal, $key:ident, $ty:ty) => {
        Some(concat!($prefix, stringify!($key)))
    };
}

/// One declared setting, before clap's command line is consulted for its flag and
/// variable.
pub(crate) struct Declared {
    /// The file's table holding the key, `None` at the top level.
    pub table: Option<&'static str>,
    /// The key in the file (in the table).
    pub key: &'static str,
    /// The clap id of the flag, which is also its name with `_`; `None`: file only.
    pub flag: Option<&'static str>,
    /// The built-in default.
    pub default: SettingDefault,
    /// The declaration's doc comment.
    pub doc: &'static str,
}

/// Declares every setting of `gsrelay serve` once; see the `config` module's text for
/// the syntax and what it expands to.
macro_rules! settings {
    (
        $(
            section $heading:literal {
                $(
                    $(#[doc = $doc:literal])*
                    $name:ident : $ty:ty $(= $default:expr)?
                    $(, unset $unset:literal)?
                    $(, from_flag $conv:expr)?
                    $(, debug $debug:expr)?
                    $(, arg($($arg:tt)*))?
                    ;
                )*
            }
        )*
        $(
            table $theading:literal $table:ident : $Table:ident, $Args:ident,
                flags $prefix:literal {
                $(
                    $(#[doc = $tdoc:literal])*
                    $key:ident
                    $(: $fty:ty $(, from_flag $tconv:expr)? $(, arg($($targ:tt)*))?)?
                    $(, unset $tunset:literal)?
                    ;
                )*
            }
        )*
    ) => {
        /// Everything `gsrelay serve` needs, fully resolved; also the file's schema. Its
        /// fields are declared, each once with its flag and variable, in `config/mod.rs`.
        #[derive(Clone, PartialEq, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct ServeConfig {
            $($(
                $(#[doc = $doc])*
                pub $name: $crate::config::declare::field_type!($ty $(, $default)?),
            )*)*
            $(
                #[doc = concat!("The `[", stringify!($table), "]` table (", $theading, ").")]
                pub $table: $Table,
            )*
        }

        impl Default for ServeConfig {
            fn default() -> Self {
                Self {
                    $($(
                        $name: $crate::config::declare::field_default!($($default)?),
                    )*)*
                    $(
                        $table: <$Table>::default(),
                    )*
                }
            }
        }

        impl fmt::Debug for ServeConfig {
            // Each field as it is, or as its declaration's `debug` shows it: secrets never
            // reach a log line.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut s = f.debug_struct("ServeConfig");
                $($({
                    let value = &self.$name;
                    $(
                        let hidden = ($debug)(value);
                        let value = &hidden;
                    )?
                    s.field(stringify!($name), value);
                })*)*
                $(
                    s.field(stringify!($table), &self.$table);
                )*
                s.finish()
            }
        }

        /// Command-line flags of `gsrelay serve`, each also read from a `GSRELAY_*`
        /// variable; `None` where neither was given, so that the file decides.
        #[derive(Debug, Clone, Default, Args)]
        pub struct ServeArgs {
            /// TOML configuration file (the keys of docs/configuration.md: the flags' names
            /// with `_`, relay limits under `[relay]`, HTTP limits under `[http]` without the
            /// `http_` prefix). Flags and environment variables override it.
            #[arg(
                long,
                env = $crate::config::declare::name!("GSRELAY_", "config", Upper),
                value_name = "FILE"
            )]
            pub config: Option<PathBuf>,
            $($(
                #[doc = concat!("Overrides [`ServeConfig::", stringify!($name), "`].")]
                #[arg(
                    long,
                    env = $crate::config::declare::name!("GSRELAY_", stringify!($name), Upper),
                    help_heading = $heading,
                    help = help_of(stringify!($name)),
                    $($($arg)*)?
                )]
                pub $name: Option<$ty>,
            )*)*
            $(
                #[doc = concat!("The flags of the `[", stringify!($table), "]` table.")]
                #[command(flatten)]
                pub $table: $Args,
            )*
        }

        $(
            #[doc = concat!(
                "The flags of the `[", stringify!($table), "]` table (", $theading,
                "), part of [`ServeArgs`]."
            )]
            #[derive(Debug, Clone, Default, Args)]
            pub struct $Args {
                $($(
                    #[doc = concat!(
                        "Overrides `[", stringify!($table), "] ", stringify!($key), "`."
                    )]
                    #[arg(
                        id = concat!($prefix, stringify!($key)),
                        long = $crate::config::declare::name!($prefix, stringify!($key), Dash),
                        env = $crate::config::declare::name!(
                            concat!("GSRELAY_", $prefix), stringify!($key), Upper
                        ),
                        help_heading = $theading,
                        help = help_of(concat!($prefix, stringify!($key))),
                        $($($targ)*)?
                    )]
                    pub $key: Option<$fty>,
                )?)*
            }
        )*

        impl ServeArgs {
            /// Overrides `cfg` with every flag or variable that was given.
            pub fn apply(&self, mut cfg: ServeConfig) -> ServeConfig {
                $($(
                    if let Some(value) = &self.$name {
                        let value = value.clone();
                        $(let value = ($conv)(value);)?
                        cfg.$name = $crate::config::declare::field_value!(value $(, $default)?);
                    }
                )*)*
                $($($(
                    if let Some(value) = &self.$table.$key {
                        let value: $fty = value.clone();
                        $(let value = ($tconv)(value);)?
                        cfg.$table.$key = value;
                    }
                )?)*)*
                cfg
            }
        }

        /// Every setting as declared, in the order of the declaration.
        fn declared() -> Vec<$crate::config::declare::Declared> {
            use $crate::config::declare::{Declared, SettingDefault, maybe, table_flag};
            let top = ServeConfig::default();
            vec![
                $($(
                    Declared {
                        table: None,
                        key: stringify!($name),
                        flag: Some(stringify!($name)),
                        default: SettingDefault::of(&top.$name, maybe!($($unset)?)),
                        doc: concat!($($doc, "\n",)*),
                    },
                )*)*
                $($(
                    Declared {
                        table: Some(stringify!($table)),
                        key: stringify!($key),
                        flag: table_flag!($prefix, $key $(, $fty)?),
                        default: SettingDefault::of(&top.$table.$key, maybe!($($tunset)?)),
                        doc: concat!($($tdoc, "\n",)*),
                    },
                )*)*
            ]
        }

        $(
            // Every key of the table is declared: a field added to the struct and not here
            // fails to compile, rather than going without flag and reference.
            const _: fn(&$Table) = |table| {
                let $Table { $($key: _,)* } = table;
            };
        )*

        /// The help of the flag with clap id `id`: its declaration's doc and default.
        fn help_of(id: &str) -> String {
            let setting = declared()
                .into_iter()
                .find(|d| d.flag == Some(id))
                .expect("every flag is declared");
            $crate::config::declare::help(setting.doc, &setting.default)
        }
    };
}

pub(crate) use {field_default, field_type, field_value, maybe, name, settings, table_flag};
