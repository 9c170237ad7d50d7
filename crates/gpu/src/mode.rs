//! `SET eddy.gpu = on|off|auto`: the session switch and the other GPU options.
//!
//! [`GpuOptions`] is a DataFusion [`ConfigExtension`] with prefix `eddy`, so
//! once a session config carries it (`SessionConfig::with_option_extension`)
//! DataFusion's own `SET eddy.gpu = 'on'` updates it and the
//! [`crate::OffloadToGpu`] rule reads it from the `ConfigOptions` it is given.

use std::fmt;
use std::str::FromStr;

use datafusion::common::config::{ConfigExtension, ConfigField, ExtensionOptions, Visit};
use datafusion::common::{config_err, Result as DfResult};

/// What the session asks of the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuMode {
    /// Offload supported subtrees whenever a device is present, regardless
    /// of input size (used by correctness checks).
    On,
    /// Never offload.
    Off,
    /// Offload when a device is present and the input is above
    /// `eddy.gpu_min_rows` (the default).
    #[default]
    Auto,
}

/// Error of parsing a [`GpuMode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for eddy.gpu: \"{0}\" (expected on, off or auto)")]
pub struct ParseGpuModeError(pub String);

impl FromStr for GpuMode {
    type Err = ParseGpuModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().trim_matches('\'').to_ascii_lowercase().as_str() {
            "on" | "true" | "1" | "yes" | "force" => Ok(GpuMode::On),
            "off" | "false" | "0" | "no" => Ok(GpuMode::Off),
            "auto" | "default" => Ok(GpuMode::Auto),
            _ => Err(ParseGpuModeError(s.to_string())),
        }
    }
}

impl fmt::Display for GpuMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GpuMode::On => "on",
            GpuMode::Off => "off",
            GpuMode::Auto => "auto",
        })
    }
}

impl ConfigField for GpuMode {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, description: &'static str) {
        v.some(key, self, description)
    }

    fn set(&mut self, _key: &str, value: &str) -> DfResult<()> {
        match value.parse() {
            Ok(m) => {
                *self = m;
                Ok(())
            }
            Err(e) => config_err!("{e}"),
        }
    }

    fn reset(&mut self, _key: &str) -> DfResult<()> {
        *self = GpuMode::default();
        Ok(())
    }
}

/// A boolean setting parsed as PostgreSQL parses one: `on`/`off`,
/// `true`/`false`, `yes`/`no`, `1`/`0` (any case, quotes allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch(pub bool);

impl fmt::Display for Switch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 { "on" } else { "off" })
    }
}

impl ConfigField for Switch {
    fn visit<V: Visit>(&self, v: &mut V, key: &str, description: &'static str) {
        v.some(key, self, description)
    }

    fn set(&mut self, key: &str, value: &str) -> DfResult<()> {
        match value
            .trim()
            .trim_matches('\'')
            .to_ascii_lowercase()
            .as_str()
        {
            "on" | "true" | "yes" | "1" => self.0 = true,
            "off" | "false" | "no" | "0" => self.0 = false,
            _ => {
                return config_err!(
                    "a Boolean value is required, not \"{value}\" (on, off, true, false, yes, no, 1 or 0){}",
                    if key.is_empty() { String::new() } else { format!(" for {key}") }
                )
            }
        }
        Ok(())
    }

    fn reset(&mut self, _key: &str) -> DfResult<()> {
        self.0 = true;
        Ok(())
    }
}

datafusion::common::extensions_options! {
    /// GPU options of a session, keys under `eddy.`.
    pub struct GpuOptions {
        /// `eddy.gpu`: on, off or auto.
        pub gpu: GpuMode, default = GpuMode::Auto
        /// `eddy.gpu_min_rows`: in auto mode, inputs with fewer (estimated)
        /// rows stay on the CPU: copies and launches cost more than they save.
        pub gpu_min_rows: usize, default = 1_000_000
        /// `eddy.gpu_max_build_bytes`: a join build side larger than this
        /// (estimated) stays on the CPU; 0 means "a quarter of the device".
        pub gpu_max_build_bytes: usize, default = 0
        /// `eddy.gpu_kernel_cache_dir`: where compiled kernels (PTX) are kept
        /// across restarts; empty means memory only. The kernel cache is the
        /// process's, so setting it in one session sets it for all.
        pub gpu_kernel_cache_dir: String, default = String::new()
        /// `eddy.gpu_fuse`: fuse a star join and the partial aggregation
        /// above it into one kernel (GpuJoinAggExec); off plans them as two
        /// operators (GpuJoinExec, GpuPreAggExec), for comparison.
        pub gpu_fuse: Switch, default = Switch(true)
    }
}

impl ConfigExtension for GpuOptions {
    const PREFIX: &'static str = "eddy";
}

impl GpuOptions {
    /// The options of a session: the registered extension, or defaults.
    pub fn from_config(config: &datafusion::config::ConfigOptions) -> GpuOptions {
        config
            .extensions
            .get::<GpuOptions>()
            .cloned()
            .unwrap_or_default()
    }

    /// Sets one key given without the `eddy.` prefix (`gpu`, `gpu_min_rows`).
    pub fn set_key(&mut self, key: &str, value: &str) -> DfResult<()> {
        ExtensionOptions::set(self, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes() {
        assert_eq!("on".parse::<GpuMode>(), Ok(GpuMode::On));
        assert_eq!("'OFF'".parse::<GpuMode>(), Ok(GpuMode::Off));
        assert_eq!(" auto ".parse::<GpuMode>(), Ok(GpuMode::Auto));
        assert!("maybe".parse::<GpuMode>().is_err());
        assert_eq!(GpuMode::On.to_string(), "on");
    }

    #[test]
    fn set_through_datafusion_config() {
        let mut cfg = datafusion::config::ConfigOptions::new();
        cfg.extensions.insert(GpuOptions::default());
        cfg.set("eddy.gpu", "off").expect("set eddy.gpu");
        cfg.set("eddy.gpu_min_rows", "10").expect("set min rows");
        assert_eq!(GpuOptions::from_config(&cfg).gpu_fuse, Switch(true));
        cfg.set("eddy.gpu_fuse", "off").expect("set fuse");
        let o = GpuOptions::from_config(&cfg);
        assert_eq!(o.gpu, GpuMode::Off);
        assert_eq!(o.gpu_min_rows, 10);
        assert_eq!(o.gpu_fuse, Switch(false));
        assert!(cfg.set("eddy.gpu_fuse", "sideways").is_err());
        cfg.set("eddy.gpu_fuse", "'ON'").expect("set fuse");
        assert_eq!(GpuOptions::from_config(&cfg).gpu_fuse, Switch(true));
        assert!(cfg.set("eddy.gpu", "sideways").is_err());
    }
}
