//! Runs generated kernels on the CPU: each kernel's CUDA C is compiled a
//! second time, as C++ with `cuda_emu.h` (CUDA built-ins) and linked with
//! `emu_runtime.cc` (blocks in turn, a block's threads as fibers switched
//! at `__syncthreads` / `__ballot_sync`) into a shared library, loaded here
//! and launched with a CUDA-style argument vector (`void** args`, one
//! pointer to each argument's value, as `cuLaunchKernel` takes them).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use eddy_gpu::codegen::KernelSource;

/// One kernel argument, as the host would pass it.
#[derive(Debug, Clone)]
pub enum Arg {
    /// A device buffer: its bytes, 8-aligned (kernels read int64 from it).
    Buf(Vec<u64>),
    /// A NULL pointer (a validity bitmap of a column without NULLs).
    Null,
    /// A scalar passed by value; narrower C types read its low bytes.
    Scalar(u64),
}

impl Arg {
    /// A buffer holding `bytes`.
    pub fn bytes(bytes: &[u8]) -> Arg {
        let mut w = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: w has at least bytes.len() bytes of storage.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), w.as_mut_ptr() as *mut u8, bytes.len())
        };
        Arg::Buf(w)
    }

    /// A zeroed buffer of `len` bytes.
    pub fn zeroed(len: usize) -> Arg {
        Arg::Buf(vec![0u64; len.div_ceil(8).max(1)])
    }

    /// The buffer's bytes (empty for scalars and NULL).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            // SAFETY: viewing u64 storage as bytes is always valid.
            Arg::Buf(w) => unsafe {
                std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 8)
            },
            _ => &[],
        }
    }
}

fn dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

fn src_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/emulation")
}

/// Whether a host C++ compiler is there; None after a notice when not (a
/// failure when `EDDY_REQUIRE_NVRTC` is set, as in CI).
pub fn cxx_available() -> bool {
    let ok = Command::new("c++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            !super::common::required(),
            "EDDY_REQUIRE_NVRTC is set but there is no C++ compiler (c++)"
        );
        eprintln!("notice: no C++ compiler (c++); kernels not emulated");
    }
    ok
}

fn runtime_object() -> &'static Path {
    static OBJ: OnceLock<PathBuf> = OnceLock::new();
    OBJ.get_or_init(|| {
        let obj = dir().join("emu_runtime.o");
        let out = Command::new("c++")
            .args(["-std=c++17", "-O1", "-fPIC", "-c", "-o"])
            .arg(&obj)
            .arg(src_dir().join("emu_runtime.cc"))
            .output()
            .expect("run c++");
        assert!(
            out.status.success(),
            "emu_runtime.cc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        obj
    })
}

/// The kernel's parameter list, read back from its signature: (C type, name).
pub fn signature(k: &KernelSource) -> Vec<(String, String)> {
    let open = format!(" {}(\n", k.entry);
    let start = k.source.find(&open).expect("kernel signature") + open.len();
    let end = start + k.source[start..].find(")\n{").expect("end of signature");
    k.source[start..end]
        .split(",\n")
        .map(|d| {
            let d = match d.find("/*") {
                Some(i) => &d[..i],
                None => d,
            };
            let d = d.replace("__restrict__", " ");
            let mut toks: Vec<&str> = d.split_whitespace().collect();
            let name = toks.pop().expect("parameter name").to_string();
            (toks.join(" "), name)
        })
        .collect()
}

/// A kernel compiled for the CPU.
pub struct EmuKernel {
    lib: libloading::Library,
    pub params: usize,
}

type LaunchFn = unsafe extern "C" fn(*mut *mut c_void, c_uint, c_uint) -> c_int;
type ErrorFn = unsafe extern "C" fn() -> *const c_char;

impl EmuKernel {
    /// Compiles `k` with the emulation header; panics with the compiler's
    /// output when the kernel is not valid C++ under it.
    pub fn build(k: &KernelSource) -> EmuKernel {
        let sig = signature(k);
        assert_eq!(
            sig.len(),
            k.params.len(),
            "signature vs params of {}",
            k.entry
        );
        let mut src = k.source.clone();
        src.push_str("\n// Emulation entry points.\nstatic void eddy_emu_body(void** a) {\n");
        let args: Vec<String> = sig
            .iter()
            .enumerate()
            .map(|(i, (ty, _))| format!("*({ty}*)a[{i}]"))
            .collect();
        src.push_str(&format!("  {}({});\n}}\n", k.entry, args.join(", ")));
        src.push_str(
            "extern \"C\" int eddy_emu_run(void (*)(void**), void**, unsigned, unsigned);\n\
             extern \"C\" int eddy_emu_launch(void** a, unsigned grid, unsigned block) {\n\
             \x20 return eddy_emu_run(eddy_emu_body, a, grid, block);\n}\n",
        );
        // Unique per build: tests run in parallel and may build one kernel twice.
        static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stem = format!("{:016x}-{n}", k.hash);
        let cc = dir().join(format!("{stem}.cc"));
        let so = dir().join(format!("{stem}.so"));
        std::fs::write(&cc, &src).expect("write kernel");
        let out = Command::new("c++")
            .args([
                "-std=c++17",
                "-O1",
                "-fPIC",
                "-shared",
                // The device rounds each float operation (we check against
                // DataFusion's, which does not fuse either).
                "-ffp-contract=off",
                "-fno-strict-aliasing",
                "-Wall",
                "-Wno-unused-variable",
                "-Wno-unused-function",
                "-include",
            ])
            .arg(src_dir().join("cuda_emu.h"))
            .arg(&cc)
            .arg(runtime_object())
            .arg("-o")
            .arg(&so)
            .output()
            .expect("run c++");
        assert!(
            out.status.success(),
            "kernel {} does not compile for the emulator: {}\n--- source ---\n{src}",
            k.entry,
            String::from_utf8_lossy(&out.stderr)
        );
        // SAFETY: the library is ours, built just now from generated code.
        let lib = unsafe { libloading::Library::new(&so) }.expect("load emulated kernel");
        EmuKernel {
            lib,
            params: sig.len(),
        }
    }

    /// Launches `grid` blocks of `block` threads over `args` (in parameter
    /// order). Err: what the emulator found undefined (a divergent barrier).
    pub fn launch(&self, args: &mut [Arg], grid: u32, block: u32) -> Result<(), String> {
        assert_eq!(args.len(), self.params, "argument count");
        let mut ptrs: Vec<*mut c_void> = args
            .iter_mut()
            .map(|a| match a {
                Arg::Buf(w) => w.as_mut_ptr() as *mut c_void,
                _ => std::ptr::null_mut(),
            })
            .collect();
        let mut argv: Vec<*mut c_void> = args
            .iter_mut()
            .zip(ptrs.iter_mut())
            .map(|(a, p)| match a {
                Arg::Scalar(s) => s as *mut u64 as *mut c_void,
                _ => p as *mut *mut c_void as *mut c_void,
            })
            .collect();
        // SAFETY: the symbols are the ones the wrapper above defines; every
        // buffer is as large as the kernel's contract with the host says
        // (the caller sizes them as the exec operators do).
        unsafe {
            let launch: libloading::Symbol<LaunchFn> =
                self.lib.get(b"eddy_emu_launch\0").expect("launch symbol");
            if launch(argv.as_mut_ptr(), grid, block) == 0 {
                return Ok(());
            }
            let err: libloading::Symbol<ErrorFn> = self
                .lib
                .get(b"eddy_emu_last_error\0")
                .expect("error symbol");
            Err(CStr::from_ptr(err()).to_string_lossy().into_owned())
        }
    }
}
