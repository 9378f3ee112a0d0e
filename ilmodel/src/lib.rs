//! Offline side of camdnn's global step: the exact ILP oracle, demonstration
//! generation, imitation training and ONNX export. Never linked by the daemon.
