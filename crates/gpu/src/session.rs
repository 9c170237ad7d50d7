//! Wiring helpers for the SQL layer: three calls connect the GPU to a session.
//!
//! ```ignore
//! let config = eddy_gpu::session::with_gpu_options(config);          // SessionConfig
//! let state = eddy_gpu::session::with_gpu_rule(builder).build();      // SessionStateBuilder
//! if let Some(r) = eddy_gpu::session::apply_set(&ctx, &name, &value) { r? } // SET eddy.gpu ...
//! ```

use std::sync::Arc;

use datafusion::error::Result as DfResult;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::mode::GpuOptions;
use crate::optimizer::OffloadToGpu;

/// Registers the `eddy.gpu*` options on a session config.
pub fn with_gpu_options(config: SessionConfig) -> SessionConfig {
    config.with_option_extension(GpuOptions::default())
}

/// Appends the [`OffloadToGpu`] rule (after DataFusion's own rules).
pub fn with_gpu_rule(builder: SessionStateBuilder) -> SessionStateBuilder {
    with_gpu_rule_handle(builder).0
}

/// [`with_gpu_rule`], also returning the rule, whose
/// [`OffloadToGpu::explain_lines`] say what the last plan put on the device
/// and why the rest stayed on the CPU (for `EXPLAIN`).
pub fn with_gpu_rule_handle(
    builder: SessionStateBuilder,
) -> (SessionStateBuilder, Arc<OffloadToGpu>) {
    let rule = Arc::new(OffloadToGpu::new());
    (
        builder.with_physical_optimizer_rule(Arc::clone(&rule) as _),
        rule,
    )
}

/// Applies `SET name = value` when `name` is one of this crate's keys
/// (`eddy.gpu`, `eddy.gpu_min_rows`, ...): `None` for other names, so a
/// SQL layer that handles SET itself can forward just these. Validation
/// errors (`SET eddy.gpu = sideways`) come back as `Some(Err(..))`.
pub fn apply_set(ctx: &SessionContext, name: &str, value: &str) -> Option<DfResult<()>> {
    let name = name.trim().to_ascii_lowercase();
    if name != "eddy.gpu" && !name.starts_with("eddy.gpu_") {
        return None;
    }
    let value = value.trim().trim_matches('\'');
    let state = ctx.state_ref();
    let mut state = state.write();
    let options = state.config_mut().options_mut();
    if options.extensions.get::<GpuOptions>().is_none() {
        options.extensions.insert(GpuOptions::default());
    }
    let applied = options.set(&name, value);
    if applied.is_ok() && name == "eddy.gpu_kernel_cache_dir" {
        crate::compile::cache().set_dir(Some(std::path::PathBuf::from(value)));
    }
    Some(applied)
}

/// The current `eddy.gpu` mode of a session (for `SHOW eddy.gpu`).
pub fn current(ctx: &SessionContext) -> GpuOptions {
    GpuOptions::from_config(ctx.state().config().options())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuMode;

    #[test]
    fn set_reaches_the_session_config() {
        let ctx = SessionContext::new_with_config(with_gpu_options(SessionConfig::new()));
        assert!(apply_set(&ctx, "search_path", "public").is_none());
        apply_set(&ctx, "EDDY.GPU", "'off'")
            .expect("ours")
            .expect("valid");
        assert_eq!(current(&ctx).gpu, GpuMode::Off);
        assert!(apply_set(&ctx, "eddy.gpu", "sideways")
            .expect("ours")
            .is_err());
        // Works on a session that never registered the options, too.
        let plain = SessionContext::new();
        apply_set(&plain, "eddy.gpu_min_rows", "5")
            .expect("ours")
            .expect("valid");
        assert_eq!(current(&plain).gpu_min_rows, 5);
    }
}
