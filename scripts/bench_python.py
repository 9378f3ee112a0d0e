#!/usr/bin/env python3
"""Sequential baseline of `camdnnd bench`: the paper-shaped graph (upstream
boxes, one classifier per class) written the way a user would with
onnxruntime, Pillow and numpy: one InferenceSession per model, and per frame
every box cropped, resized, normalised and classified one at a time.

Usage: .venv/bin/python scripts/bench_python.py JOB.json

JOB.json (written by `camdnnd bench`):
  {"width": W, "height": H, "intra_threads": 1,
   "models": {CLASS: {"name", "path", "width", "height", "scale", "mean",
                      "std", "bgr", "layout"}},
   "warmup": [[[x0, y0, x1, y1, CLASS], ...], ...],   # untimed frames
   "frames": [[[x0, y0, x1, y1, CLASS], ...], ...]}   # timed frames

The image is the same synthetic RGB frame camdnnd bench sends:
pixel (x, y, c) = (3x + 5y + 7c) mod 256. Prints one JSON line:
{"frames", "seconds", "delays_ms", "onnxruntime"}.
"""

import json
import sys
import time

import numpy as np
import onnxruntime as ort
from PIL import Image


def synthetic_frame(width, height):
    """The frame camdnnd bench sends, as an H x W x 3 uint8 array."""
    y, x, c = np.meshgrid(np.arange(height), np.arange(width), np.arange(3), indexing="ij")
    return ((3 * x + 5 * y + 7 * c) % 256).astype(np.uint8)


class Classifier:
    """One model: an InferenceSession plus its preprocessing."""

    def __init__(self, spec, threads):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            spec["path"], sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self.input = self.session.get_inputs()[0].name
        self.size = (spec["width"], spec["height"])
        self.scale = np.float32(spec["scale"])
        self.mean = np.array(spec["mean"], dtype=np.float32)
        self.std = np.array(spec["std"], dtype=np.float32)
        self.bgr = spec["bgr"]
        self.layout = spec["layout"]
        if self.layout not in ("nchw", "nhwc"):
            raise SystemExit(f"bench_python.py: layout {self.layout} not supported")

    def __call__(self, image, box):
        x0, y0, x1, y1 = box
        crop = image.crop((int(x0), int(y0), int(round(x1)), int(round(y1))))
        crop = crop.resize(self.size, Image.BILINEAR)
        a = np.asarray(crop, dtype=np.float32)
        if self.bgr:
            a = a[:, :, ::-1]
        a = (a * self.scale - self.mean) / self.std
        if self.layout == "nchw":
            a = a.transpose(2, 0, 1)
        batch = np.ascontiguousarray(a[None, ...], dtype=np.float32)
        out = self.session.run(None, {self.input: batch})[0]
        return int(np.argmax(out))


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        job = json.load(f)
    models = {c: Classifier(s, job["intra_threads"]) for c, s in job["models"].items()}
    pixels = synthetic_frame(job["width"], job["height"])

    def process(boxes):
        image = Image.fromarray(pixels)  # a new frame arrives
        labels = []
        for x0, y0, x1, y1, cls in boxes:
            model = models.get(cls)
            if model is not None:
                labels.append(model(image, (x0, y0, x1, y1)))
        return labels

    for boxes in job["warmup"]:
        process(boxes)
    delays = []
    start = time.perf_counter()
    for boxes in job["frames"]:
        t0 = time.perf_counter()
        process(boxes)
        delays.append((time.perf_counter() - t0) * 1e3)
    seconds = time.perf_counter() - start
    print(json.dumps({"frames": len(delays), "seconds": seconds, "delays_ms": delays,
                      "onnxruntime": ort.__version__}))


if __name__ == "__main__":
    main()
