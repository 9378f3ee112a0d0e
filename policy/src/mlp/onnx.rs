//! The network alone, run with tract-onnx: features in, (prob, count) out.

use tract_onnx::prelude::{tvec, IntoTValue, Tensor, TypedRunnableModel};

use super::MlpError;

/// The network alone: features in, (prob, count) out.
pub struct OnnxMlp {
    plan: std::sync::Arc<TypedRunnableModel>,
    inputs: usize,
    outputs: usize,
}

impl std::fmt::Debug for OnnxMlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxMlp")
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl OnnxMlp {
    /// Loads an ONNX MLP with one [1, inputs] input and two [1, outputs]
    /// outputs.
    pub fn load(bytes: &[u8], inputs: usize, outputs: usize) -> Result<Self, MlpError> {
        use tract_onnx::prelude::*;
        let err = |e: TractError| MlpError::Onnx(format!("{e:#}"));
        let plan = tract_onnx::onnx()
            .model_for_read(&mut std::io::Cursor::new(bytes))
            .map_err(err)?
            .with_input_fact(0, f32::fact([1, inputs]).into())
            .map_err(err)?
            .into_optimized()
            .map_err(err)?
            .into_runnable()
            .map_err(err)?;
        let net = OnnxMlp {
            plan,
            inputs,
            outputs,
        };
        let (p, c) = net.run(&vec![0.0; inputs])?;
        if p.len() != outputs || c.len() != outputs {
            return Err(MlpError::Onnx(format!(
                "the network has outputs of {} and {} values, the sidecar lists {outputs} slots",
                p.len(),
                c.len()
            )));
        }
        Ok(net)
    }

    /// Runs the network on one feature vector.
    pub fn run(&self, features: &[f32]) -> Result<(Vec<f32>, Vec<f32>), MlpError> {
        let mut p = vec![0.0; self.outputs];
        let mut c = vec![0.0; self.outputs];
        self.run_into(features, &mut p, &mut c)?;
        Ok((p, c))
    }

    /// Runs the network, writing into caller buffers (any length; extra
    /// values are ignored, missing ones left untouched).
    pub fn run_into(
        &self,
        features: &[f32],
        prob: &mut [f32],
        count: &mut [f32],
    ) -> Result<(), MlpError> {
        if features.len() != self.inputs {
            return Err(MlpError::Onnx(format!(
                "{} features given, the network takes {}",
                features.len(),
                self.inputs
            )));
        }
        let x = Tensor::from_shape(&[1, self.inputs], features)
            .map_err(|e| MlpError::Onnx(format!("{e:#}")))?;
        let out = self
            .plan
            .run(tvec!(x.into_tvalue()))
            .map_err(|e| MlpError::Onnx(format!("{e:#}")))?;
        if out.len() != 2 {
            return Err(MlpError::Onnx(format!(
                "the network has {} outputs, expected 2 (prob, count)",
                out.len()
            )));
        }
        for (o, dst) in out.iter().zip([prob, count]) {
            let v = o
                .to_plain_array_view::<f32>()
                .map_err(|e| MlpError::Onnx(format!("{e:#}")))?;
            for (d, s) in dst.iter_mut().zip(v.iter()) {
                *d = *s;
            }
        }
        Ok(())
    }
}
