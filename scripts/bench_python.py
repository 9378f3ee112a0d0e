#!/usr/bin/env python3
"""Sequential baseline of `camdnnd bench`: the paper-shaped graph (upstream
boxes, one classifier per class) written the way a user would with
onnxruntime, Pillow and numpy: one InferenceSession per model, and per frame
every box cropped, resized, normalised and classified one at a time.

Usage: .venv/bin/python scripts/bench_python.py JOB.json [--worker K --workers N]
                                                    [--go PATH] [--fps F]

With --workers N, this process is worker K of N user processes taking frames
round robin: it walks frames K, K+N, ... only. With --go, it prints "ready"
after loading and warming up, then waits for PATH to exist; PATH holds the
common start time (time.time()). With --fps, frame n arrives n / F s after
the start (an open loop: its delay runs from its arrival to its answer);
without, frames are walked back to back (closed loop).

JOB.json (written by `camdnnd bench`):
  {"width": W, "height": H, "intra_threads": 1,
   "models": {CLASS: {"name", "path", "width", "height", "scale", "mean",
                      "std", "bgr", "layout"}},
   "warmup": [[[x0, y0, x1, y1, CLASS], ...], ...],   # untimed frames
   "frames": [[[x0, y0, x1, y1, CLASS], ...], ...]}   # timed frames

The image is the same synthetic RGB frame camdnnd bench sends:
pixel (x, y, c) = (3x + 5y + 7c) mod 256. Prints one JSON line:
{"frames", "seconds", "delays_ms", "onnxruntime", "start", "end",
 "indices", "digests", "crops", "detector_runs"}: the work check of camdnnd
bench (crops per model, and per frame a digest of the answers computed as
daemon/src/cmd/bench/work.rs does: FNV-1a 64 over
"class|x0,y0,x1,y1|model=top1;" per object, summed per frame).
"""

import argparse
import json
import math
import os
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
        self.name = spec["name"]
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


MASK = (1 << 64) - 1


def fnv1a(text):
    """FNV-1a 64 of a string's UTF-8 bytes."""
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def corner(v):
    """Rounded half away from zero, as Rust's f32::round."""
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("job")
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--go")
    ap.add_argument("--fps", type=float)
    a = ap.parse_args()
    with open(a.job) as f:
        job = json.load(f)
    models = {c: Classifier(s, job["intra_threads"]) for c, s in job["models"].items()}
    pixels = synthetic_frame(job["width"], job["height"])
    crops = {}

    def process(boxes):
        """One frame; returns its digest. Boxes of a class without a model
        are answered unclassified (as the pipeline does), not skipped."""
        image = Image.fromarray(pixels)  # a new frame arrives
        digest = 0
        for x0, y0, x1, y1, cls in boxes:
            model = models.get(cls)
            answers = ""
            if model is not None:
                answers = f"{model.name}={model(image, (x0, y0, x1, y1))};"
                crops[model.name] = crops.get(model.name, 0) + 1
            line = f"{cls}|{corner(x0)},{corner(y0)},{corner(x1)},{corner(y1)}|{answers}"
            digest = (digest + fnv1a(line)) & MASK
        return digest

    for boxes in job["warmup"]:
        process(boxes)
    crops.clear()
    if a.go:
        print("ready", flush=True)
        while not os.path.exists(a.go):
            time.sleep(0.001)
        with open(a.go) as f:
            start = float(f.read())
        while time.time() < start:
            time.sleep(0.0005)
    else:
        start = time.time()
    delays, indices, digests = [], [], []
    for n in range(a.worker, len(job["frames"]), a.workers):
        if a.fps:
            arrival = start + n / a.fps
            while time.time() < arrival:
                time.sleep(max(0.0, min(0.005, arrival - time.time())))
        else:
            arrival = time.time()
        digest = process(job["frames"][n])
        delays.append((time.time() - arrival) * 1e3)
        indices.append(n)
        digests.append(f"{digest:016x}")
    end = time.time()
    print(json.dumps({"frames": len(delays), "seconds": end - start, "delays_ms": delays,
                      "onnxruntime": ort.__version__, "start": start, "end": end,
                      "indices": indices, "digests": digests, "crops": crops,
                      "detector_runs": 0}))


if __name__ == "__main__":
    main()
