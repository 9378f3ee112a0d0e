#!/usr/bin/env python3
"""Our faceres.onnx on the face crops the Human library's own pipeline cut (written by run.cjs
with DUMP=1 as FILE.faceN.f32: 192x192x3, 0..1), prepared as the library prepares them for
faceres (bilinear resize to 224 without half-pixel centres, times 255), read the way it reads
them. Prints one line per crop: age and male probability, to set beside run.cjs's output; then
the male probability when the same face is only SIDE pixels in the frame (the crop shrunk to
SIDE and enlarged back), which shows below what size the model answers its prior.

Usage: compare.py MODEL CROP.f32 [CROP.f32 ...]
"""
import sys

import numpy as np
import onnxruntime as ort
from PIL import Image

# Face sides (pixels) the size sweep tries.
SIDES = (8, 16, 24, 32, 48, 64, 96, 192)


def tf_resize_bilinear(a, oh, ow):
    """tf.image.resizeBilinear with alignCorners=false, halfPixelCenters=false."""
    h, w, _ = a.shape
    ys, xs = np.arange(oh) * (h / oh), np.arange(ow) * (w / ow)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = a[y0][:, x0] * (1 - fx) + a[y0][:, x1] * fx
    bottom = a[y1][:, x0] * (1 - fx) + a[y1][:, x1] * fx
    return top * (1 - fy) + bottom * fy


def main():
    sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    for path in sys.argv[2:]:
        crop = np.fromfile(path, np.float32).reshape(192, 192, 3)
        x = (tf_resize_bilinear(crop, 224, 224) * 255).astype(np.float32)
        age, male = sess.run(None, {"input_1": x[None]})
        p = age[0]
        i = int(p.argmax())
        years = (10 * i - 100 * p[i - 1]) if p[i - 1] > p[i + 1] else (10 * i + 100 * p[i + 1])
        print(f"{path}: ours on the library's crop: age {round(years) / 10}, male {male[0, 0]:.2f}")
        face = Image.fromarray((crop * 255).clip(0, 255).astype(np.uint8))
        sweep = []
        for side in SIDES:
            small = face.resize((side, side), Image.BILINEAR).resize((224, 224), Image.BILINEAR)
            _, m = sess.run(None, {"input_1": np.asarray(small, np.float32)[None]})
            sweep.append(f"{side} px {m[0, 0]:.2f}")
        print(f"  male when the face is: {', '.join(sweep)}")


if __name__ == "__main__":
    main()
