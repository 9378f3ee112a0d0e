"""TFLite coverage of camdnn's tract engine against LiteRT, as a Markdown table.

For every .tflite file given: feed the same input (scripts' test photo
testdata/astronaut.ppm resized to the model's input, scaled to [-1, 1]) to
LiteRT's interpreter (the reference) and to camdnn (the `tflite_run` example of
camdnn-engine: the TFLite loading pass, then tract), and report whether camdnn
loads and runs the model and how far each output is from LiteRT's:
max |camdnn - litert| and that divided by max |litert| ("rel").

Usage: tflite_coverage.py RUNNER IMAGE.ppm MODEL.tflite... (see tflite_coverage.sh).
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def read_ppm(path):
    with open(path, "rb") as f:
        data = f.read()
    parts, pos = [], 0
    while len(parts) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        start = pos
        while not data[pos:pos + 1].isspace():
            pos += 1
        parts.append(data[start:pos])
    if parts[0] != b"P6" or parts[3] != b"255":
        sys.exit(f"{path}: not a binary 8-bit PPM")
    w, h = int(parts[1]), int(parts[2])
    return np.frombuffer(data[pos + 1:pos + 1 + w * h * 3], np.uint8).reshape(h, w, 3)


def input_for(image, shape):
    """The photo resized (nearest) to NHWC `shape`, in [-1, 1]."""
    _, h, w, c = shape
    ys = (np.arange(h) * image.shape[0] / h).astype(int)
    xs = (np.arange(w) * image.shape[1] / w).astype(int)
    x = image[ys][:, xs][..., :c].astype(np.float32) / 127.5 - 1.0
    return x[None]


def reference(model, image):
    interp = Interpreter(model_path=model, num_threads=1)
    interp.allocate_tensors()
    inputs = []
    for d in interp.get_input_details():
        x = input_for(image, d["shape"]).astype(d["dtype"])
        interp.set_tensor(d["index"], x)
        inputs.append(x)
    interp.invoke()
    outs = [interp.get_tensor(d["index"]).astype(np.float32) for d in interp.get_output_details()]
    return inputs, outs


def camdnn(runner, model, inputs):
    with tempfile.TemporaryDirectory() as d:
        for i, x in enumerate(inputs):
            x.astype("<f4").tofile(os.path.join(d, f"in_{i}.bin"))
        r = subprocess.run([runner, model, d], capture_output=True, text=True, timeout=600)
        lines = r.stdout.splitlines()
        status = {l.split(" ", 1)[0]: (l.split(" ", 1) + [""])[1] for l in lines}
        outs = []
        if "ran" in status:
            i = 0
            while os.path.exists(os.path.join(d, f"out_{i}.bin")):
                shape = [int(s) for s in open(os.path.join(d, f"out_{i}.shape")).read().split()]
                outs.append(np.fromfile(os.path.join(d, f"out_{i}.bin"), "<f4").reshape(shape))
                i += 1
        if r.returncode != 0 and not status:
            status["run-error"] = f"runner exited {r.returncode}: {r.stderr.strip()[-300:]}"
        return status, outs


def rewrites(detail):
    if "TFLite rewrites: " not in detail:
        return "none"
    return detail.split("TFLite rewrites: ", 1)[1]


def main():
    runner, image_path, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    image = read_ppm(image_path)
    print("| model | loads | runs | outputs | max abs diff | max abs LiteRT | rel | rewrites or refusal |")
    print("|---|---|---|---|---|---|---|---|")
    loads = runs = matches = 0
    for model in models:
        name = os.path.basename(model)
        try:
            inputs, ref = reference(model, image)
            ref_error = None
        except Exception as e:  # LiteRT itself cannot run it (e.g. an unregistered custom op)
            inputs, ref, ref_error = None, None, str(e).splitlines()[0]
        if inputs is None:
            # the same photo, shaped from camdnn's view is unknown here: load only
            status, _ = camdnn(runner, model, [])
        else:
            status, outs = camdnn(runner, model, inputs)
        loaded = "loaded" in status
        ran = "ran" in status
        loads += loaded
        cells = [name, "yes" if loaded else "no", "yes" if ran else "no"]
        if ran and ref is not None:
            runs += 1
            if len(outs) != len(ref) or any(a.shape != b.shape for a, b in zip(outs, ref)):
                cells += [f"{len(outs)} vs {len(ref)} (shapes differ)", "", "", ""]
            else:
                diff = max(float(np.abs(a - b).max()) for a, b in zip(outs, ref))
                scale = max(float(np.abs(b).max()) for b in ref)
                rel = diff / scale if scale > 0 else diff
                matches += rel <= 1e-3
                cells += [str(len(ref)), f"{diff:.2e}", f"{scale:.3g}", f"{rel:.2e}"]
        else:
            cells += ["", "", "", ""]
        if loaded:
            note = rewrites(status["loaded"])
            if "run-error" in status:
                note += "; run error: " + status["run-error"]
        else:
            note = "refused: " + status.get("load-error", status.get("run-error", "?"))
        if ref_error:
            note += f"; LiteRT: {ref_error}"
        cells.append(note.replace("|", "/"))
        print("| " + " | ".join(cells) + " |", flush=True)
    print()
    print(f"{len(models)} files: {loads} load, {runs} run, {matches} within 1e-3 relative of LiteRT.")


if __name__ == "__main__":
    main()
