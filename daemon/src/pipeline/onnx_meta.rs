//! Reads an ONNX file's `metadata_props` (key/value strings) without an ONNX
//! library: PP-OCRv4's recogniser carries its character dictionary there.
//! A minimal protobuf walk over the top-level `ModelProto` fields.

use std::path::Path;

use anyhow::{bail, Context};

/// `ModelProto.metadata_props` field number.
const METADATA_PROPS: u64 = 14;

fn varint(buf: &[u8], pos: &mut usize) -> anyhow::Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).context("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    bail!("varint longer than 10 bytes")
}

/// The length-delimited payload at `pos` (after its tag).
fn bytes<'a>(buf: &'a [u8], pos: &mut usize) -> anyhow::Result<&'a [u8]> {
    let n = usize::try_from(varint(buf, pos)?).context("length overflows")?;
    let end = pos.checked_add(n).filter(|&e| e <= buf.len());
    let end = end.context("length-delimited field runs past the end")?;
    let out = &buf[*pos..end];
    *pos = end;
    Ok(out)
}

/// One field of a message: its number and, for length-delimited ones, the payload.
type Field<'a> = (u64, Option<&'a [u8]>);

/// Top-level fields of a message.
fn fields(buf: &[u8]) -> anyhow::Result<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let tag = varint(buf, &mut pos)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            0 => {
                varint(buf, &mut pos)?;
                out.push((field, None));
            }
            1 | 5 => {
                pos += if wire == 1 { 8 } else { 4 };
                if pos > buf.len() {
                    bail!("fixed-width field runs past the end");
                }
                out.push((field, None));
            }
            2 => out.push((field, Some(bytes(buf, &mut pos)?))),
            w => bail!("unsupported protobuf wire type {w}"),
        }
    }
    Ok(out)
}

/// The metadata value stored under `key` in the ONNX model bytes, if any.
pub fn metadata_value(model: &[u8], key: &str) -> anyhow::Result<Option<String>> {
    for (field, payload) in fields(model)? {
        let (METADATA_PROPS, Some(entry)) = (field, payload) else {
            continue;
        };
        let (mut k, mut v) = (None, None);
        for (f, p) in fields(entry)? {
            match (f, p) {
                (1, Some(p)) => k = Some(p),
                (2, Some(p)) => v = Some(p),
                _ => {}
            }
        }
        if k == Some(key.as_bytes()) {
            let v = v.unwrap_or_default();
            return Ok(Some(
                String::from_utf8(v.to_vec()).context("metadata value is not UTF-8")?,
            ));
        }
    }
    Ok(None)
}

/// The metadata value under `key` in the ONNX file at `path`; an error names the
/// file when it cannot be read, is not ONNX or has no such key.
pub fn read_metadata(path: &Path, key: &str) -> anyhow::Result<String> {
    let buf = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    metadata_value(&buf, key)
        .with_context(|| format!("{} is not a readable ONNX model", path.display()))?
        .with_context(|| format!("{} has no metadata entry {key:?}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(field: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(field << 3 | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn finds_the_key_among_other_fields() {
        let mut model = vec![0x08, 0x07]; // ir_version = 7 (varint)
        model.extend(ld(7, b"graph bytes"));
        let mut entry = ld(1, b"other");
        entry.extend(ld(2, b"x"));
        model.extend(ld(14, &entry));
        let mut entry = ld(1, b"character");
        entry.extend(ld(2, b"a\nb"));
        model.extend(ld(14, &entry));
        assert_eq!(
            metadata_value(&model, "character").unwrap().as_deref(),
            Some("a\nb")
        );
        assert_eq!(metadata_value(&model, "missing").unwrap(), None);
        assert!(metadata_value(&model[..model.len() - 1], "character").is_err());
        assert!(metadata_value(&[0x0f], "k").is_err());
    }
}
