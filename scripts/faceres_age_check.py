#!/usr/bin/env python3
"""What faceres's age head tells apart: our faceres.onnx on the 108 face crops of the Human
library's own face-matching screenshot (assets/screenshot-facematch.jpg in the npm package
@vladmandic/human 3.3.6, which scripts/fetch_models.sh downloads to models/.downloads/), read
the way the library reads it (argmax year moved towards its likelier neighbour).

Usage: .venv/bin/python scripts/faceres_age_check.py
Prints the age's median and 10-90 % range per gender and how many ages lie within 2 years of
29.3 or 39.4 (what the library itself answers for the astronaut and for its own author:
scripts/human_reference.cjs). The crops are the screenshot's grid of 6 rows x 18 faces (tiles
of 106.7 x 110.5 px from y = 284), less the caption Human printed under each.
"""
import io
import sys
import tarfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
TGZ = ROOT / "models/.downloads/vladmandic-human-3.3.6.tgz"
MODEL = ROOT / "models/faceres.onnx"


def age_of(p):
    i = int(p.argmax())
    below = p[i - 1] if i > 0 else 0.0
    above = p[i + 1] if i < 99 else 0.0
    return i - 10 * below if below > above else i + 10 * above


def main():
    for f in (TGZ, MODEL):
        if not f.is_file():
            sys.exit(f"{f} is missing: run scripts/setup.sh (scripts/fetch_models.sh)")
    with tarfile.open(TGZ) as t:
        shot = Image.open(io.BytesIO(t.extractfile("package/assets/screenshot-facematch.jpg").read()))
    shot = shot.convert("RGB")
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    ages, males = [], []
    for r in range(6):
        for c in range(18):
            x0, y0 = c * 106.67 + 4, 284 + r * 110.5 + 14
            tile = shot.crop((int(x0), int(y0), int(x0 + 98), int(y0 + 76))).resize((224, 224), Image.BILINEAR)
            age, male = sess.run(None, {"input_1": np.asarray(tile, np.float32)[None]})
            ages.append(age_of(age[0]))
            males.append(float(male[0, 0]))
    ages, males = np.array(ages), np.array(males)
    for name, sel in (("male", males > 0.5), ("female", males <= 0.5)):
        lo, hi = np.percentile(ages[sel], [10, 90])
        print(f"{name}: {sel.sum()} faces, age median {np.median(ages[sel]):.1f}, 10-90 %: {lo:.1f}-{hi:.1f}")
    near = ((abs(ages - 29.3) < 2) | (abs(ages - 39.4) < 2)).sum()
    print(f"ages within 2 years of 29.3 or 39.4: {near} of {len(ages)}")


if __name__ == "__main__":
    main()
