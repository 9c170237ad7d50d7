//! PostgreSQL type emulation: Arrow type <-> PostgreSQL type OID, and the
//! text and binary wire encodings of values.
//!
//! Invariant: every Arrow type maps to exactly one OID, and the bytes
//! [`encode_cell`] writes are valid for that OID in the requested format.
//! Types with no binary encoder here (intervals, lists, ...) are announced
//! as `text`, whose binary form is its text form, so a client can never be
//! handed bytes it cannot decode.
//!
//! One job per file; callers use the re-exports here (`crate::pgtypes::x`):
//! - `oids`: OIDs, type names, `typlen`, Arrow/SQL type -> OID/`ColumnType`;
//! - `datetime`: dates, timestamps and times, text and binary;
//! - `numeric`: `numeric` text and binary (base-10000) forms;
//! - `text_in`: text input -> `Value` ([`parse_text`]);
//! - `params`: bound parameters and binary input ([`parse_param`], [`parse_binary`]);
//! - `encode`: result cells -> text or binary bytes ([`encode_cell`]);
//! - `values`: coercion between column types, a value's text form, a value
//!   as a DataFusion literal (`Value` <-> Arrow arrays is
//!   `eddy_storage::arrow_values`, which refuses a mismatch).
//!
//! The decoding and encoding files are client-reachable with arbitrary
//! bytes, so they deny clippy's narrowing-cast, sign-loss, indexing and
//! unchecked-arithmetic lints (see docs/design/sql.md, "Type and wire
//! modules: lints").

/// PostgreSQL type OIDs Eddy uses.
pub mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const CHAR: u32 = 18;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT2VECTOR: u32 = 22;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const OID_ARRAY: u32 = 1028;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const UNKNOWN: u32 = 705;
    pub const VARCHAR: u32 = 1043;
    pub const BPCHAR: u32 = 1042;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const JSON: u32 = 114;
    pub const JSONB: u32 = 3802;
    pub const INT2_ARRAY: u32 = 1005;
    pub const INT4_ARRAY: u32 = 1007;
    pub const TEXT_ARRAY: u32 = 1009;
    pub const INT8_ARRAY: u32 = 1016;
    pub const UUID_ARRAY: u32 = 2951;
    pub const BOOL_ARRAY: u32 = 1000;
    pub const BYTEA_ARRAY: u32 = 1001;
    pub const BPCHAR_ARRAY: u32 = 1014;
    pub const VARCHAR_ARRAY: u32 = 1015;
    pub const FLOAT4_ARRAY: u32 = 1021;
    pub const FLOAT8_ARRAY: u32 = 1022;
    pub const TIMESTAMP_ARRAY: u32 = 1115;
    pub const DATE_ARRAY: u32 = 1182;
    pub const TIME_ARRAY: u32 = 1183;
    pub const TIMESTAMPTZ_ARRAY: u32 = 1185;
    pub const INTERVAL_ARRAY: u32 = 1187;
    pub const NUMERIC_ARRAY: u32 = 1231;
    pub const JSON_ARRAY: u32 = 199;
    pub const JSONB_ARRAY: u32 = 3807;
}

/// Wire format of one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Binary,
}

mod datetime;
mod encode;
mod numeric;
mod oids;
mod params;
mod text_in;
mod values;

#[cfg(test)]
mod fuzz;

pub use datetime::*;
pub use encode::*;
pub use numeric::*;
pub use oids::*;
pub use params::*;
pub use text_in::*;
pub use values::*;
