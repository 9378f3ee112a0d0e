//! A small owned tensor so the daemon never sees ndarray, tract or ort types.

use crate::EngineError;

/// Element type of a [`Tensor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit float (images, logits).
    F32,
    /// Unsigned byte (raw image planes).
    U8,
    /// 64-bit signed integer (token ids, shapes).
    I64,
}

/// Owned, row-major element storage of a [`Tensor`].
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// f32 elements.
    F32(Vec<f32>),
    /// u8 elements.
    U8(Vec<u8>),
    /// i64 elements.
    I64(Vec<i64>),
}

impl TensorData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::I64(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::U8(_) => DType::U8,
            TensorData::I64(_) => DType::I64,
        }
    }

    /// `n` zero elements of type `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> TensorData {
        match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::U8 => TensorData::U8(vec![0; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
        }
    }

    /// No elements yet, room for `n` without reallocating.
    pub fn with_capacity(dtype: DType, n: usize) -> TensorData {
        match dtype {
            DType::F32 => TensorData::F32(Vec::with_capacity(n)),
            DType::U8 => TensorData::U8(Vec::with_capacity(n)),
            DType::I64 => TensorData::I64(Vec::with_capacity(n)),
        }
    }
}

/// An owned tensor: a name (the model's input/output name, may be empty for inputs),
/// a shape and row-major data whose length always equals the product of the shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    name: String,
    shape: Vec<usize>,
    data: TensorData,
}

impl Tensor {
    /// Builds a tensor, checking that `data` has exactly as many elements as `shape` needs.
    pub fn new(
        name: impl Into<String>,
        shape: Vec<usize>,
        data: TensorData,
    ) -> Result<Tensor, EngineError> {
        let name = name.into();
        let expected: usize = shape.iter().product();
        if expected != data.len() {
            return Err(EngineError::TensorShape {
                name,
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor { name, shape, data })
    }

    /// An unnamed f32 tensor (the usual input).
    pub fn from_f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor, EngineError> {
        Tensor::new(String::new(), shape, TensorData::F32(data))
    }

    /// A named tensor of zeros.
    pub fn zeros(name: impl Into<String>, dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product();
        Tensor {
            name: name.into(),
            shape,
            data: TensorData::zeros(dtype, n),
        }
    }

    /// The same tensor under another name.
    pub fn with_name(mut self, name: impl Into<String>) -> Tensor {
        self.name = name.into();
        self
    }

    /// Model input/output name (empty when not given).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Shape, leading dim = batch for model inputs and outputs.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The elements.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// Takes the elements out.
    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// The elements as f32, when the tensor is f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for a tensor with no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Leading dimension (the batch), `None` for a scalar.
    pub fn batch(&self) -> Option<usize> {
        self.shape.first().copied()
    }

    /// Rows `start..start + len` along the leading (batch) dimension.
    pub fn slice_batch(&self, start: usize, len: usize) -> Result<Tensor, EngineError> {
        let batch = self.batch().unwrap_or(0);
        if start + len > batch {
            return Err(EngineError::BadInput {
                model: "".into(),
                reason: format!(
                    "tensor `{}`: rows {start}..{} out of a batch of {batch}",
                    self.name,
                    start + len
                ),
            });
        }
        let row: usize = self.shape[1..].iter().product();
        let (a, b) = (start * row, (start + len) * row);
        let data = match &self.data {
            TensorData::F32(v) => TensorData::F32(v[a..b].to_vec()),
            TensorData::U8(v) => TensorData::U8(v[a..b].to_vec()),
            TensorData::I64(v) => TensorData::I64(v[a..b].to_vec()),
        };
        let mut shape = self.shape.clone();
        shape[0] = len;
        Ok(Tensor {
            name: self.name.clone(),
            shape,
            data,
        })
    }

    /// [`Tensor::concat_batch`] of owned parts; a single part is moved as it
    /// is, without copying its data (a batch of one is the common case for
    /// large inputs such as a detector's frame).
    pub fn into_batch(mut parts: Vec<Tensor>) -> Result<Tensor, EngineError> {
        match parts.len() {
            1 if !parts[0].shape.is_empty() => Ok(parts.remove(0)),
            _ => Self::concat_batch(&parts),
        }
    }

    /// Concatenates tensors along the leading dimension; all parts must agree on
    /// name, element type and every other dimension.
    pub fn concat_batch(parts: &[Tensor]) -> Result<Tensor, EngineError> {
        let first = parts.first().ok_or_else(|| EngineError::BadInput {
            model: "".into(),
            reason: "concat_batch of zero tensors".into(),
        })?;
        if first.shape.is_empty() {
            return Err(EngineError::BadInput {
                model: "".into(),
                reason: format!("tensor `{}` is a scalar, it has no batch dim", first.name),
            });
        }
        let mut batch = 0;
        // One allocation of the final size: growing by doubling would copy
        // (and fault in) the rows again at every step.
        let total: usize = parts.iter().map(|p| p.data.len()).sum();
        let mut data = TensorData::with_capacity(first.dtype(), total);
        for p in parts {
            if p.shape.len() != first.shape.len()
                || p.shape[1..] != first.shape[1..]
                || p.dtype() != first.dtype()
            {
                return Err(EngineError::BadInput {
                    model: "".into(),
                    reason: format!(
                        "cannot concatenate `{}` {:?} {:?} with {:?} {:?}",
                        first.name,
                        first.dtype(),
                        first.shape,
                        p.dtype(),
                        p.shape
                    ),
                });
            }
            batch += p.shape[0];
            match (&mut data, &p.data) {
                (TensorData::F32(d), TensorData::F32(s)) => d.extend_from_slice(s),
                (TensorData::U8(d), TensorData::U8(s)) => d.extend_from_slice(s),
                (TensorData::I64(d), TensorData::I64(s)) => d.extend_from_slice(s),
                _ => unreachable!("dtypes checked equal above"),
            }
        }
        let mut shape = first.shape.clone();
        shape[0] = batch;
        Ok(Tensor {
            name: first.name.clone(),
            shape,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_element_count() {
        let err = Tensor::from_f32(vec![2, 3], vec![0.0; 5]).unwrap_err();
        assert!(err.to_string().contains("needs 6 elements but 5"), "{err}");
    }

    #[test]
    fn slice_and_concat_round_trip() {
        let t = Tensor::from_f32(vec![3, 2], (0..6).map(|x| x as f32).collect()).unwrap();
        let a = t.slice_batch(0, 1).unwrap();
        let b = t.slice_batch(1, 2).unwrap();
        assert_eq!(b.as_f32().unwrap(), &[2.0, 3.0, 4.0, 5.0]);
        assert_eq!(Tensor::concat_batch(&[a, b]).unwrap(), t);
        assert!(t.slice_batch(2, 2).is_err());
    }

    #[test]
    fn a_batch_of_one_is_the_part_itself_and_more_parts_concatenate() {
        let t = Tensor::from_f32(vec![1, 2], vec![1.0, 2.0]).unwrap();
        let ptr = match &t.data {
            TensorData::F32(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        let one = Tensor::into_batch(vec![t.clone()]).unwrap();
        assert_eq!(one, t);
        let moved = Tensor::into_batch(vec![t]).unwrap();
        assert!(
            matches!(&moved.data, TensorData::F32(v) if v.as_ptr() == ptr),
            "not copied"
        );
        let two = Tensor::into_batch(vec![moved.clone(), moved.clone()]).unwrap();
        assert_eq!(two.shape, vec![2, 2]);
        assert_eq!(two, Tensor::concat_batch(&[moved.clone(), moved]).unwrap());
        assert!(Tensor::into_batch(Vec::new()).is_err());
        let scalar = Tensor::from_f32(vec![], vec![1.0]).unwrap();
        assert!(
            Tensor::into_batch(vec![scalar]).is_err(),
            "a scalar has no batch dim"
        );
    }

    #[test]
    fn concat_refuses_mismatched_rows() {
        let a = Tensor::zeros("x", DType::F32, vec![1, 2]);
        let b = Tensor::zeros("x", DType::F32, vec![1, 3]);
        assert!(Tensor::concat_batch(&[a, b]).is_err());
    }
}
