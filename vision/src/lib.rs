//! Pixels to tensors and tensors to boxes: decoding, resizing, crops, normalisation, detector decoders and NMS
