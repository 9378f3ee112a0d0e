//! The ONNX Runtime engine (crate `ort`, library loaded at run time) with one execution
//! provider per processor: cpu, xnnpack, cuda or qnn.
//!
//! The shared library is found, in order: the path given to [`OrtEngine::new`], the
//! `ORT_DYLIB_PATH` environment variable, [`packaged_ort_library`] (the one the
//! `camdnn-onnxruntime` package installs beside the binary: `/usr/bin/camdnnd` finds
//! `/usr/lib/camdnn/libonnxruntime.so.*`), then [`dev_ort_library`] (the ONNX Runtime
//! wheel in the repo's `.venv`, installed by `scripts/setup.sh`). ONNX Runtime is loaded
//! once per process; asking for a second, different library is an error.
//!
//! Providers: a provider missing from the loaded ONNX Runtime build is an error at
//! [`Engine::check_processor`] and at load, never a silent fallback to CPU. For `cuda`
//! and `qnn`, ONNX Runtime's per-node CPU fallback is disabled too
//! (`session.disable_cpu_ep_fallback`), so a model that does not fully run on the
//! accelerator fails at load instead of quietly running partly on the CPU. `xnnpack`
//! keeps the per-node fallback (it is a CPU provider with a small op set).
//! Dynamic batch runs batch k in one `Session::run`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use ort::environment::Environment;
use ort::ep::{self, ExecutionProvider};
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{Session, SessionInputValue};
use ort::value::{TensorElementType, TensorRef, ValueType};

use crate::engine::expect_kind;
use crate::model::{batch_mode_of, resolve_dims};
use crate::{
    BatchMode, DType, Dim, Engine, EngineError, EngineKind, LoadedModel, ModelFormat, ModelInfo,
    ModelSource, OrtProvider, ProcessorConfig, Tensor, TensorData, TensorInfo,
};

const ENGINE: &str = "ort";

/// The process-wide ONNX Runtime environment and the library it came from.
static ORT: Mutex<Option<(PathBuf, Environment)>> = Mutex::new(None);

/// The ONNX Runtime engine.
#[derive(Clone)]
pub struct OrtEngine {
    env: Environment,
    library: PathBuf,
}

impl std::fmt::Debug for OrtEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtEngine")
            .field("library", &self.library)
            .finish()
    }
}

/// The ONNX Runtime library of the development venv (`<repo>/.venv/lib/python*/
/// site-packages/onnxruntime/capi/libonnxruntime.so.*`), looked up from the current
/// directory and from this crate's source directory. `None` when not installed.
pub fn dev_ort_library() -> Option<PathBuf> {
    let roots = [
        std::env::current_dir().ok(),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")),
    ];
    for root in roots.into_iter().flatten() {
        let lib = root.join(".venv").join("lib");
        let Ok(pythons) = std::fs::read_dir(&lib) else {
            continue;
        };
        for py in pythons.flatten() {
            if let Some(p) = newest_ort_in(&py.path().join("site-packages/onnxruntime/capi")) {
                return Some(p);
            }
        }
    }
    None
}

/// The ONNX Runtime library installed beside the running binary: `<prefix>/lib/camdnn/
/// libonnxruntime.so.*` for a binary in `<prefix>/bin` (the Debian packages put
/// camdnnd in `/usr/bin` and the library in `/usr/lib/camdnn`, so the daemon, its
/// systemd unit and an operator's `camdnnd profile` find it without `ORT_DYLIB_PATH`).
/// `None` when there is none.
pub fn packaged_ort_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let prefix = exe.parent()?.parent()?;
    newest_ort_in(&prefix.join("lib").join("camdnn"))
}

/// The `libonnxruntime.so.*` file in `dir` with the greatest name, if any.
fn newest_ort_in(dir: &Path) -> Option<PathBuf> {
    let files = std::fs::read_dir(dir).ok()?;
    files
        .flatten()
        .map(|f| f.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so."))
        })
        .max()
}

impl OrtEngine {
    /// Loads ONNX Runtime (once per process) from `library`, else `ORT_DYLIB_PATH`, else
    /// [`packaged_ort_library`], else [`dev_ort_library`].
    pub fn new(library: Option<&Path>) -> Result<OrtEngine, EngineError> {
        let path = match library {
            Some(p) => p.to_path_buf(),
            None => match std::env::var_os("ORT_DYLIB_PATH") {
                Some(p) => PathBuf::from(p),
                None => packaged_ort_library()
                    .or_else(dev_ort_library)
                    .ok_or_else(|| {
                        EngineError::OrtLibrary(
                            "no library given, ORT_DYLIB_PATH is not set, there is none in ../lib/camdnn beside the binary (package camdnn-onnxruntime) and .venv has no onnxruntime wheel; install camdnn-onnxruntime, run scripts/setup.sh or set ORT_DYLIB_PATH to libonnxruntime.so".into(),
                        )
                    })?,
            },
        };
        let path = path.canonicalize().map_err(|e| {
            EngineError::OrtLibrary(format!("{}: {e}; run scripts/setup.sh", path.display()))
        })?;
        let mut global = ORT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((loaded, env)) = global.as_ref() {
            if *loaded != path {
                return Err(EngineError::OrtLibrary(format!(
                    "already loaded from {}; cannot also load {} in the same process",
                    loaded.display(),
                    path.display()
                )));
            }
            return Ok(OrtEngine {
                env: env.clone(),
                library: path,
            });
        }
        let env = ort::init_from(&path)
            .map_err(|e| EngineError::OrtLibrary(format!("{}: {e}", path.display())))?
            .with_name("camdnnd")
            .build()
            .map_err(|e| EngineError::OrtLibrary(format!("creating the environment: {e}")))?;
        *global = Some((path.clone(), env.clone()));
        Ok(OrtEngine { env, library: path })
    }

    /// Path of the loaded ONNX Runtime library.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The providers among cpu/xnnpack/cuda/qnn that this ONNX Runtime build has.
    pub fn available_providers(&self) -> Vec<OrtProvider> {
        [
            OrtProvider::Cpu,
            OrtProvider::Xnnpack,
            OrtProvider::Cuda,
            OrtProvider::Qnn,
        ]
        .into_iter()
        .filter(|p| provider_available(*p).unwrap_or(false))
        .collect()
    }

    fn session(
        &self,
        model: &ModelSource,
        proc: &ProcessorConfig,
        provider: OrtProvider,
    ) -> Result<Session, EngineError> {
        let fail = |stage: &str, e: String| EngineError::Backend {
            model: model.name.clone(),
            engine: ENGINE,
            stage: stage.into(),
            reason: e,
        };
        let mut path = model.path.clone();
        let conf = |e: ort::Error<SessionBuilder>| fail("configuring the session", e.to_string());
        let mut builder = Session::builder(&self.env)
            .map_err(|e| fail("creating the session builder", e.to_string()))?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(conf)?
            .with_intra_threads(proc.intra_threads)
            .map_err(conf)?
            .with_inter_threads(1)
            .map_err(conf)?
            // Workers sleep between batches; spinning would burn the core other work needs.
            .with_intra_op_spinning(false)
            .map_err(conf)?;
        let dispatch = match provider {
            // ort's default turns the arena off (ONNX Runtime's own default is on): every
            // run would then map and fault in fresh pages for its activations.
            OrtProvider::Cpu => ep::CPU::default().with_arena_allocator(true).build(),
            OrtProvider::Xnnpack => ep::XNNPACK::default().build(),
            OrtProvider::Cuda => ep::CUDA::default().build(),
            OrtProvider::Qnn => {
                let qnn = proc.qnn.as_ref().ok_or_else(|| EngineError::Processor {
                    processor: proc.name.clone(),
                    reason: "provider qnn needs a [qnn] table with backend_path".into(),
                })?;
                let mut q =
                    ep::QNN::default().with_backend_path(qnn.backend_path.display().to_string());
                if let Some(mode) = &qnn.htp_performance_mode {
                    use ep::ArbitrarilyConfigurableExecutionProvider;
                    q = q.with_arbitrary_config("htp_performance_mode", mode);
                }
                if let Some(dir) = &qnn.context_cache_dir {
                    let ctx = dir.join(format!("{}_ctx.onnx", model.name));
                    if ctx.is_file() {
                        // A compiled context from an earlier load: load it instead.
                        path = ctx;
                    } else {
                        builder = builder
                            .with_config_entry("ep.context_enable", "1")
                            .map_err(conf)?
                            .with_config_entry("ep.context_file_path", ctx.display().to_string())
                            .map_err(conf)?
                            .with_config_entry("ep.context_embed_mode", "1")
                            .map_err(conf)?;
                    }
                }
                q.build()
            }
        };
        if matches!(provider, OrtProvider::Cuda | OrtProvider::Qnn) {
            builder = builder
                .with_disable_cpu_fallback()
                .map_err(|e| fail("disabling CPU fallback", e.to_string()))?;
        }
        builder = builder
            .with_execution_providers([dispatch.error_on_failure()])
            .map_err(|e| fail("registering the execution provider", e.to_string()))?;
        if !path.is_file() {
            return Err(EngineError::ModelFile {
                model: model.name.clone(),
                path,
                reason: "no such file".into(),
            });
        }
        builder.commit_from_file(&path).map_err(|e| {
            let msg = e.to_string();
            match unsupported_ops_in(&msg) {
                Some(ops) => EngineError::UnsupportedOps {
                    model: model.name.clone(),
                    engine: ENGINE,
                    ops,
                },
                None => fail("creating the session", msg),
            }
        })
    }
}

/// Element type, dims (`None` = dynamic) and dim symbols of one session input/output.
type OutletDesc = (DType, Vec<Option<i64>>, Vec<String>);

/// Operator names from ONNX Runtime's "no kernel / not registered" messages.
fn unsupported_ops_in(msg: &str) -> Option<Vec<String>> {
    let mut ops = Vec::new();
    for (marker, end) in [
        ("No Op registered for ", ' '),
        ("Could not find an implementation for ", '('),
    ] {
        let mut rest = msg;
        while let Some(i) = rest.find(marker) {
            rest = &rest[i + marker.len()..];
            let op: String = rest.chars().take_while(|c| *c != end).collect();
            if !op.is_empty() && !ops.contains(&op) {
                ops.push(op);
            }
        }
    }
    ops.sort();
    (!ops.is_empty()).then_some(ops)
}

fn provider_available(p: OrtProvider) -> ort::Result<bool> {
    match p {
        OrtProvider::Cpu => ep::CPU::is_available(),
        OrtProvider::Xnnpack => ep::XNNPACK::is_available(),
        OrtProvider::Cuda => ep::CUDA::is_available(),
        OrtProvider::Qnn => ep::QNN::is_available(),
    }
}

fn dtype_of(t: TensorElementType) -> Option<DType> {
    match t {
        TensorElementType::Float32 => Some(DType::F32),
        TensorElementType::Uint8 => Some(DType::U8),
        TensorElementType::Int64 => Some(DType::I64),
        _ => None,
    }
}

impl Engine for OrtEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Ort
    }

    fn check_processor(&self, proc: &ProcessorConfig) -> Result<(), EngineError> {
        expect_kind(proc, EngineKind::Ort)?;
        let err = |reason: String| EngineError::Processor {
            processor: proc.name.clone(),
            reason,
        };
        let provider = proc
            .provider
            .ok_or_else(|| err("engine ort needs `provider` (cpu, xnnpack, cuda or qnn)".into()))?;
        let available = provider_available(provider)
            .map_err(|e| err(format!("cannot query ONNX Runtime providers: {e}")))?;
        if !available {
            return Err(err(format!(
                "execution provider {} is not in the ONNX Runtime build at {} (it has: {}); no CPU fallback is made",
                provider.ort_name(),
                self.library.display(),
                self.available_providers()
                    .iter()
                    .map(|p| p.ort_name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        match (provider, &proc.qnn) {
            (OrtProvider::Qnn, None) => Err(err(
                "provider qnn needs a [qnn] table with backend_path".into(),
            )),
            (OrtProvider::Qnn, Some(q)) if !q.backend_path.is_file() => Err(err(format!(
                "QNN backend library {} does not exist",
                q.backend_path.display()
            ))),
            (OrtProvider::Qnn, Some(_)) => Ok(()),
            (_, Some(_)) => Err(err("a [qnn] table is only valid with provider qnn".into())),
            (_, None) => Ok(()),
        }
    }

    fn load(
        &self,
        model: &ModelSource,
        proc: &ProcessorConfig,
    ) -> Result<Box<dyn LoadedModel>, EngineError> {
        self.check_processor(proc)?;
        if model.format()? != ModelFormat::Onnx {
            return Err(EngineError::BadModelConfig {
                model: model.name.clone(),
                reason: "the ort engine loads ONNX models only".into(),
            });
        }
        let provider = proc.provider.unwrap_or(OrtProvider::Cpu);
        let start = Instant::now();
        let session = self.session(model, proc, provider)?;
        let name = model.name.as_str();
        let bad = |reason: String| EngineError::BadModelConfig {
            model: name.into(),
            reason,
        };
        let input_names: Vec<&str> = session.inputs().iter().map(|o| o.name()).collect();
        for given in model.input_shapes.keys() {
            if !input_names.contains(&given.as_str()) {
                return Err(bad(format!(
                    "input_shapes names `{given}`, which is not an input (inputs: {})",
                    input_names.join(", ")
                )));
            }
        }
        let describe = |outlet: &ort::value::Outlet| -> Result<OutletDesc, EngineError> {
            match outlet.dtype() {
                ValueType::Tensor {
                    ty,
                    shape,
                    dimension_symbols,
                } => {
                    let dtype = dtype_of(*ty).ok_or_else(|| {
                        bad(format!(
                            "`{}` has element type {ty:?}; only f32, u8, i64 are supported",
                            outlet.name()
                        ))
                    })?;
                    let dims = shape.iter().map(|&d| (d > 0).then_some(d)).collect();
                    let syms = dimension_symbols.iter().map(|s| s.to_string()).collect();
                    Ok((dtype, dims, syms))
                }
                other => Err(bad(format!(
                    "`{}` is not a tensor ({other:?})",
                    outlet.name()
                ))),
            }
        };
        let mut inputs = Vec::new();
        for outlet in session.inputs() {
            let (dtype, dims, _) = describe(outlet)?;
            let shape = resolve_dims(
                name,
                outlet.name(),
                Some(dims),
                model.input_shapes.get(outlet.name()),
                true,
            )?;
            inputs.push(TensorInfo {
                name: outlet.name().to_string(),
                dtype,
                shape,
            });
        }
        let batch = batch_mode_of(name, &inputs)?;
        let mut outputs = Vec::new();
        for outlet in session.outputs() {
            let (dtype, dims, syms) = describe(outlet)?;
            let shape = dims
                .iter()
                .enumerate()
                .map(|(ix, d)| match (ix, d) {
                    (_, Some(n)) => Dim::Fixed(*n as usize),
                    (0, None) if batch == BatchMode::Native => Dim::Batch,
                    (_, None) => Dim::Dynamic(
                        syms.get(ix)
                            .filter(|s| !s.is_empty())
                            .cloned()
                            .unwrap_or_else(|| "?".into()),
                    ),
                })
                .collect();
            outputs.push(TensorInfo {
                name: outlet.name().to_string(),
                dtype,
                shape,
            });
        }
        let detail = format!(
            "ONNX Runtime {}, {} intra-op thread(s), {}",
            provider.ort_name(),
            proc.intra_threads,
            match batch {
                BatchMode::Native => "dynamic batch in one call".to_string(),
                BatchMode::Loop { model_batch } =>
                    format!("fixed batch {model_batch}, batches run as a loop"),
            }
        );
        let info = ModelInfo {
            name: name.into(),
            engine: EngineKind::Ort,
            inputs,
            outputs,
            batch,
            load_time: start.elapsed(),
            detail,
        };
        Ok(Box::new(OrtModel { info, session }))
    }
}

/// A model resident in an ONNX Runtime session.
struct OrtModel {
    info: ModelInfo,
    session: Session,
}

fn run_session(
    session: &mut Session,
    info: &ModelInfo,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, EngineError> {
    let fail = |stage: &str, e: ort::Error| EngineError::Backend {
        model: info.name.clone(),
        engine: ENGINE,
        stage: stage.into(),
        reason: e.to_string(),
    };
    let mut values: Vec<(String, SessionInputValue<'_>)> = Vec::with_capacity(inputs.len());
    for (t, spec) in inputs.iter().zip(&info.inputs) {
        let shape = t.shape().to_vec();
        let value: SessionInputValue<'_> = match t.data() {
            TensorData::F32(v) => TensorRef::from_array_view((shape, v.as_slice()))
                .map_err(|e| fail("converting inputs", e))?
                .into(),
            TensorData::U8(v) => TensorRef::from_array_view((shape, v.as_slice()))
                .map_err(|e| fail("converting inputs", e))?
                .into(),
            TensorData::I64(v) => TensorRef::from_array_view((shape, v.as_slice()))
                .map_err(|e| fail("converting inputs", e))?
                .into(),
        };
        values.push((spec.name.clone(), value));
    }
    let outs = session.run(values).map_err(|e| fail("running", e))?;
    let mut result = Vec::with_capacity(info.outputs.len());
    for spec in &info.outputs {
        let v = outs.get(&spec.name).ok_or_else(|| EngineError::Backend {
            model: info.name.clone(),
            engine: ENGINE,
            stage: "reading outputs".into(),
            reason: format!("output `{}` missing", spec.name),
        })?;
        let (shape, data) = match spec.dtype {
            DType::F32 => v
                .try_extract_tensor::<f32>()
                .map(|(s, d)| (s.clone(), TensorData::F32(d.to_vec()))),
            DType::U8 => v
                .try_extract_tensor::<u8>()
                .map(|(s, d)| (s.clone(), TensorData::U8(d.to_vec()))),
            DType::I64 => v
                .try_extract_tensor::<i64>()
                .map(|(s, d)| (s.clone(), TensorData::I64(d.to_vec()))),
        }
        .map_err(|e| fail("reading outputs", e))?;
        let shape = shape.iter().map(|&d| d.max(0) as usize).collect();
        result.push(Tensor::new(spec.name.clone(), shape, data)?);
    }
    Ok(result)
}

impl LoadedModel for OrtModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError> {
        let OrtModel { info, session } = self;
        info.run_batched(inputs, |chunk| run_session(session, info, chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_op_names_from_ort_messages() {
        let m = "Load model failed: In Node, (\"n\", FooOp, \"\", -1) : Error No Op registered for FooOp with domain_version of 13";
        assert_eq!(unsupported_ops_in(m), Some(vec!["FooOp".to_string()]));
        let m = "Could not find an implementation for BarOp(7) node with name 'x'";
        assert_eq!(unsupported_ops_in(m), Some(vec!["BarOp".to_string()]));
        assert_eq!(unsupported_ops_in("file not found"), None);
    }
}
