//! NVRTC compilation with a cache keyed by source hash, in memory and on disk.
//!
//! Generated source is deterministic for a given plan shape, so the same
//! query (or any query with the same predicates) reuses its PTX: compiled
//! once per process, and once per machine when a cache directory is set
//! (`eddy.gpu_kernel_cache_dir`). Modules are loaded once per device context.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{CompileOptions, Ptx};
use parking_lot::Mutex;

use crate::codegen::KernelSource;
use crate::error::{GpuError, Result};
use crate::metrics::{GpuMetrics, GPU_METRICS};

/// The process-wide kernel cache.
#[derive(Debug, Default)]
pub struct KernelCache {
    /// (source hash, arch) → PTX text.
    ptx: Mutex<HashMap<(u64, String), Arc<String>>>,
    /// (device ordinal, source hash) → loaded module.
    modules: Mutex<HashMap<(usize, u64), Arc<CudaModule>>>,
    dir: Mutex<Option<PathBuf>>,
    /// Held while a module is compiled and loaded, so that the partitions of
    /// one query, which all miss at once, compile each kernel once instead
    /// of once per partition (seen on the first device run: 172 compiles
    /// for 13 queries).
    loading: Mutex<()>,
}

/// The cache every operator uses.
pub fn cache() -> &'static KernelCache {
    static CACHE: std::sync::OnceLock<KernelCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(KernelCache::default)
}

/// The virtual architecture to compile for: `compute_XY` of the device.
/// Kernels need sm_60+ (double `atomicAdd`) and sm_70+ (independent thread
/// scheduling for the hash-table slot wait); CUDA 13 compiles for sm_75 and
/// newer only, so sm_75 is the floor.
pub fn arch_for(cc: (i32, i32)) -> String {
    let (major, minor) = if cc < (7, 5) { (7, 5) } else { cc };
    format!("compute_{major}{minor}")
}

impl KernelCache {
    /// Sets (or clears, with an empty path) the on-disk cache directory.
    pub fn set_dir(&self, dir: Option<PathBuf>) {
        *self.dir.lock() = dir.filter(|d| !d.as_os_str().is_empty());
    }

    /// PTX for `src`, compiled with NVRTC on a miss.
    pub fn ptx(&self, src: &KernelSource, arch: &str) -> Result<Arc<String>> {
        let key = (src.hash, arch.to_string());
        if let Some(p) = self.ptx.lock().get(&key) {
            GpuMetrics::add(&GPU_METRICS.kernel_cache_hits, 1);
            return Ok(Arc::clone(p));
        }
        let dir = self.dir.lock().clone();
        let path = dir
            .as_ref()
            .map(|d| d.join(format!("{:016x}-{arch}.ptx", src.hash)));
        if let Some(p) = &path {
            if let Ok(text) = std::fs::read_to_string(p) {
                GpuMetrics::add(&GPU_METRICS.kernel_cache_hits, 1);
                let text = Arc::new(text);
                self.ptx.lock().insert(key, Arc::clone(&text));
                return Ok(text);
            }
        }
        let text = Arc::new(compile_source(&src.source, src.entry, arch)?);
        GpuMetrics::add(&GPU_METRICS.kernels_compiled, 1);
        if let Some(p) = &path {
            write_atomically(p, &text)?;
        }
        self.ptx.lock().insert(key, Arc::clone(&text));
        Ok(text)
    }

    /// The kernel's entry point, loaded into `ctx`.
    pub fn function(
        &self,
        ctx: &Arc<CudaContext>,
        src: &KernelSource,
        cc: (i32, i32),
    ) -> Result<CudaFunction> {
        self.function_named(ctx, src, cc, src.entry)
    }

    /// Entry point `entry` of `src`'s module (a translation unit may hold
    /// helper kernels beside its main one: the group table's).
    pub fn function_named(
        &self,
        ctx: &Arc<CudaContext>,
        src: &KernelSource,
        cc: (i32, i32),
        entry: &str,
    ) -> Result<CudaFunction> {
        let key = (ctx.ordinal(), src.hash);
        let module = self.modules.lock().get(&key).cloned();
        let module = match module {
            Some(m) => m,
            None => {
                let _loading = self.loading.lock();
                if let Some(m) = self.modules.lock().get(&key).cloned() {
                    return m
                        .load_function(entry)
                        .map_err(GpuError::driver("cuModuleGetFunction"));
                }
                let ptx = self.ptx(src, &arch_for(cc))?;
                let m = ctx
                    .load_module(Ptx::from_src(ptx.as_str()))
                    .map_err(GpuError::driver("cuModuleLoadData"))?;
                self.modules.lock().insert(key, Arc::clone(&m));
                m
            }
        };
        module
            .load_function(entry)
            .map_err(GpuError::driver("cuModuleGetFunction"))
    }
}

/// Compiles one translation unit to PTX. Fails with `NoCompiler` when NVRTC
/// cannot be loaded (checked first: cudarc panics otherwise).
pub fn compile_source(source: &str, name: &str, arch: &str) -> Result<String> {
    if !crate::device::nvrtc_present() {
        return Err(GpuError::NoCompiler("libnvrtc not found".into()));
    }
    let opts = CompileOptions {
        // No fused multiply-add: `a * b + c` must round twice, as the CPU
        // path does, or float projections differ in the last bit (found by
        // the compile test reading the PTX).
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "--fmad=false".into(),
        ],
        name: Some(format!("{name}.cu")),
        ..Default::default()
    };
    let res = std::panic::catch_unwind(|| cudarc::nvrtc::compile_ptx_with_opts(source, opts));
    match res {
        Ok(Ok(ptx)) => Ok(ptx.to_src()),
        Ok(Err(e)) => Err(GpuError::Compile {
            kernel: name.to_string(),
            log: format!("{e:?}"),
        }),
        Err(_) => Err(GpuError::NoCompiler(
            "NVRTC library unusable (missing symbols)".into(),
        )),
    }
}

fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let io = |source| GpuError::CacheIo {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_is_at_least_volta() {
        assert_eq!(arch_for((6, 1)), "compute_75");
        assert_eq!(arch_for((9, 0)), "compute_90");
    }

    #[test]
    fn disk_cache_round_trip_without_nvrtc_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = KernelCache::default();
        c.set_dir(Some(dir.path().to_path_buf()));
        let src = crate::codegen::KernelSource {
            entry: "eddy_scan",
            source: "extern \"C\" __global__ void eddy_scan() {}".into(),
            hash: 42,
            params: vec![],
            columns: vec![],
            dict_params: vec![],
            outputs: vec![],
            aggs: vec![],
            shared_slots: 0,
        };
        // A PTX file already on disk is served without NVRTC.
        std::fs::write(
            dir.path().join(format!("{:016x}-compute_90.ptx", 42)),
            "// ptx",
        )
        .expect("write");
        assert_eq!(
            c.ptx(&src, "compute_90").expect("cached").as_str(),
            "// ptx"
        );
        // A miss needs NVRTC: an error here, compiled PTX on a GPU machine.
        match c.ptx(&src, "compute_80") {
            Ok(p) => assert!(p.contains(".entry") || p.contains("eddy_scan")),
            Err(e) => assert!(matches!(e, GpuError::NoCompiler(_)), "{e}"),
        }
    }
}
