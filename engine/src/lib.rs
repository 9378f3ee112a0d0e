//! Inference engines behind one trait (tract, ONNX Runtime, sim) and the per-processor worker threads of camdnnd
