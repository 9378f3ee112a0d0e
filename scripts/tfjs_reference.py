#!/usr/bin/env python3
"""A numpy executor of TensorFlow.js graph models: the independent reference the
ONNX conversion (scripts/tfjs_to_onnx.py) is checked against.

    tfjs_reference.py MODEL.json CONVERTED.onnx --image PHOTO [--tolerance T]

Runs the graph op by op in NHWC with TF's own semantics written out in numpy
(SAME padding, depthwise channel order, half-pixel resizes, masks of strided
slices, floor division), runs the ONNX file with ONNX Runtime on the same
input (PHOTO stretched to the input size, pixel values 0-255, or random
pixels with --random), and prints the largest absolute difference of every
output relative to its scale (max |ref|, at least 1). Exits non-zero when one
exceeds --tolerance. The two programs share only the weight reader
(scripts/tfjs_graph.py).
"""

import argparse
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
from tfjs_graph import TfjsError, load, np_dtype, split_ref  # noqa: E402


def same_pads(size, k, s, d):
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def pad_nhwc(x, node, k, d, value=0.0):
    pad = node.a_str("padding")
    s = node.a_ints("strides") or [1, 1, 1, 1]
    if pad == "SAME":
        ph = same_pads(x.shape[1], k[0], s[1], d[0])
        pw = same_pads(x.shape[2], k[1], s[2], d[1])
    elif pad == "VALID":
        ph, pw = (0, 0), (0, 0)
    else:
        raise TfjsError(f"{node.name}: padding {pad} unsupported by the reference")
    return np.pad(x, ((0, 0), ph, pw, (0, 0)), constant_values=value), s[1], s[2]


def windows(x, kh, kw, sh, sw, dh, dw):
    """Views [N, OH, OW, KH, KW, C] of the sliding windows."""
    n, h, w, c = x.shape
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (w - (kw - 1) * dw - 1) // sw + 1
    st = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, oh, ow, kh, kw, c), (st[0], st[1] * sh, st[2] * sw, st[1] * dh, st[2] * dw, st[3]))


def conv2d(x, w, node, depthwise):
    kh, kw, cin, m = w.shape
    d = (node.a_ints("dilations") or [1, 1, 1, 1])[1:3]
    xp, sh, sw = pad_nhwc(x, node, (kh, kw), d)
    win = windows(np.ascontiguousarray(xp), kh, kw, sh, sw, d[0], d[1])
    if depthwise:
        # out[..., c*m + j] = sum_k win[..., c] * w[..., c, j]
        y = np.einsum("nhwijc,ijcm->nhwcm", win, w, optimize=True)
        return y.reshape(y.shape[0], y.shape[1], y.shape[2], cin * m)
    n, oh, ow = win.shape[:3]
    cols = win.reshape(n * oh * ow, kh * kw * cin)
    return (cols @ w.reshape(kh * kw * cin, m)).reshape(n, oh, ow, m)


def resize_bilinear(x, size, align_corners, half_pixel):
    n, h, w, c = x.shape
    oh, ow = int(size[0]), int(size[1])

    def coords(o, i):
        if align_corners and o > 1:
            src = np.arange(o) * ((i - 1) / (o - 1))
        elif half_pixel:
            src = (np.arange(o) + 0.5) * (i / o) - 0.5
        else:
            src = np.arange(o) * (i / o)
        src = np.clip(src, 0, None)
        lo = np.minimum(np.floor(src).astype(int), i - 1)
        hi = np.minimum(lo + 1, i - 1)
        return lo, hi, (src - lo).astype(np.float32)

    y0, y1, fy = coords(oh, h)
    x0, x1, fx = coords(ow, w)
    top = x[:, y0][:, :, x0] * (1 - fx)[None, None, :, None] + x[:, y0][:, :, x1] * fx[None, None, :, None]
    bot = x[:, y1][:, :, x0] * (1 - fx)[None, None, :, None] + x[:, y1][:, :, x1] * fx[None, None, :, None]
    return top * (1 - fy)[None, :, None, None] + bot * fy[None, :, None, None]


def activation(kind, y, node, args, env):
    if kind is None:
        return y
    if kind == "Relu":
        return np.maximum(y, 0)
    if kind == "Relu6":
        return np.clip(y, 0, 6)
    if kind == "Prelu":
        a = env[args[1]]
        return np.where(y > 0, y, y * a)
    if kind == "LeakyRelu":
        return np.where(y > 0, y, y * node.a_float("leakyrelu_alpha", 0.2))
    if kind == "Elu":
        return np.where(y > 0, y, np.expm1(y))
    if kind == "Sigmoid":
        return 1 / (1 + np.exp(-y))
    raise TfjsError(f"{node.name}: fused {kind} unsupported by the reference")


def fused_tail(node, y, env, n_main):
    ops = node.a_strs("fused_ops")
    args = node.inputs[n_main:]
    if ops and ops[0] == "BiasAdd":
        y = y + env[args[0]]
        ops = ops[1:]
    return activation(ops[0] if ops else None, y, node, args, env)


def run(graph, feeds):
    """Every tensor of the graph for `feeds` (name -> array), keyed `name` / `name:k`."""
    env = {}
    for name, value in graph.consts.items():
        env[name] = value

    def get(ref):
        name, k = split_ref(ref)
        return env[name if k == 0 else f"{name}:{k}"]

    for node in graph.nodes:
        op, n = node.op, node.name
        if op == "Const":
            continue
        if op == "Placeholder":
            env[n] = feeds[n].astype(np_dtype(node.a_type("dtype")))
            continue
        x = [get(i) for i in node.inputs]
        if op in ("Add", "AddV2"):
            y = x[0] + x[1]
        elif op == "Sub":
            y = x[0] - x[1]
        elif op == "Mul":
            y = x[0] * x[1]
        elif op == "RealDiv":
            y = x[0] / x[1]
        elif op == "Minimum":
            y = np.minimum(x[0], x[1])
        elif op == "Maximum":
            y = np.maximum(x[0], x[1])
        elif op == "SquaredDifference":
            y = (x[0] - x[1]) ** 2
        elif op == "FloorDiv":
            y = np.floor_divide(x[0], x[1])
        elif op == "FloorMod":
            y = np.mod(x[0], x[1])
        elif op == "Equal":
            y = x[0] == x[1]
        elif op == "Relu":
            y = np.maximum(x[0], 0)
        elif op == "Relu6":
            y = np.clip(x[0], 0, 6)
        elif op == "Sigmoid":
            y = 1 / (1 + np.exp(-x[0]))
        elif op == "Sqrt":
            y = np.sqrt(x[0])
        elif op == "Identity":
            y = x[0]
        elif op == "Softmax":
            e = np.exp(x[0] - x[0].max(-1, keepdims=True))
            y = e / e.sum(-1, keepdims=True)
        elif op in ("Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "FusedDepthwiseConv2dNative"):
            y = conv2d(x[0], x[1], node, depthwise="Depthwise" in op)
            if op.startswith(("_Fused", "Fused")):
                y = fused_tail(node, y, {i: get(i) for i in node.inputs}, 2)
        elif op in ("MatMul", "_FusedMatMul"):
            a = x[0].T if node.a_bool("transpose_a") else x[0]
            b = x[1].T if node.a_bool("transpose_b") else x[1]
            y = a @ b
            if op == "_FusedMatMul":
                y = fused_tail(node, y, {i: get(i) for i in node.inputs}, 2)
        elif op == "MaxPool":
            k = node.a_ints("ksize")[1:3]
            xp, sh, sw = pad_nhwc(x[0], node, k, (1, 1), value=-np.inf)
            y = windows(np.ascontiguousarray(xp), k[0], k[1], sh, sw, 1, 1).max(axis=(3, 4))
        elif op == "ResizeBilinear":
            y = resize_bilinear(x[0], x[1], node.a_bool("align_corners"), node.a_bool("half_pixel_centers"))
        elif op == "Mean":
            y = x[0].mean(axis=tuple(np.atleast_1d(x[1]).tolist()), keepdims=node.a_bool("keep_dims"))
        elif op == "ConcatV2":
            y = np.concatenate(x[:-1], axis=int(x[-1]))
        elif op == "Pack":
            y = np.stack(x, axis=node.a_int("axis", 0))
        elif op == "Unpack":
            axis = node.a_int("axis", 0)
            for k in range(node.a_int("num")):
                env[n if k == 0 else f"{n}:{k}"] = np.take(x[0], k, axis=axis)
            continue
        elif op == "Reshape":
            y = x[0].reshape(x[1])
        elif op == "ExpandDims":
            y = np.expand_dims(x[0], int(x[1]))
        elif op == "Squeeze":
            y = np.squeeze(x[0], axis=tuple(node.a_ints("squeeze_dims")))
        elif op == "Cast":
            y = x[0].astype(np_dtype(node.a_type("DstT")))
        elif op == "Pad":
            y = np.pad(x[0], x[1])
        elif op == "StridedSlice":
            begin, end, strides = x[1], x[2], x[3]
            bm, em, sm = (node.a_int(k, 0) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
            idx = []
            for i in range(len(begin)):
                if sm >> i & 1:
                    idx.append(int(begin[i]))
                    continue
                b = None if bm >> i & 1 else int(begin[i])
                e = None if em >> i & 1 else int(end[i])
                idx.append(slice(b, e, int(strides[i])))
            y = x[0][tuple(idx)]
        elif op == "GatherV2":
            y = np.take(x[0], x[1], axis=int(x[2]))
        elif op == "GatherNd":
            idx = x[1]
            y = x[0][tuple(np.moveaxis(idx, -1, 0))]
        elif op == "TopKV2":
            k = int(x[1])
            order = np.argsort(-x[0], axis=-1, kind="stable")[..., :k]
            env[n] = np.take_along_axis(x[0], order, axis=-1)
            env[f"{n}:1"] = order.astype(np.int32)
            continue
        elif op == "ArgMax":
            y = np.argmax(x[0], axis=int(x[1])).astype(np_dtype(node.a_type("output_type")))
        else:
            raise TfjsError(f"op {op} ({n}) is not implemented by the reference")
        env[n] = np.asarray(y)
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_json")
    ap.add_argument("onnx_file")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--image", help="photo stretched to the model's input size")
    src.add_argument("--random", type=int, metavar="SEED", help="random pixels 0-255")
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="largest allowed |onnx - ref| / max(1, max |ref|) per output")
    ap.add_argument("--ignore", nargs="*", default=[],
                    help="outputs not compared (e.g. top-k indices that ties may reorder)")
    a = ap.parse_args()

    import onnxruntime as ort

    graph = load(a.model_json)
    sess = ort.InferenceSession(a.onnx_file, providers=["CPUExecutionProvider"])
    feeds_ref, feeds_onnx = {}, {}
    for inp in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
        n, h, w, c = shape
        if a.image:
            from PIL import Image

            img = Image.open(a.image).convert("RGB").resize((w, h), Image.BILINEAR)
            x = np.asarray(img, np.float32)[None]
        else:
            x = np.random.default_rng(a.random).integers(0, 256, (n, h, w, c)).astype(np.float32)
        feeds_onnx[inp.name] = x
        feeds_ref[inp.name] = x
    env = run(graph, feeds_ref)
    outs = sess.run(None, feeds_onnx)
    worst = 0.0
    for o, got in zip(sess.get_outputs(), outs):
        if o.name in a.ignore:
            print(f"{o.name}: not compared")
            continue
        want = env[o.name]
        err = float(np.abs(got.astype(np.float64) - want).max()) / max(1.0, float(np.abs(want).max()))
        worst = max(worst, err)
        print(f"{o.name}: shape {list(got.shape)}, max |onnx - ref| / scale = {err:.2e}")
    verdict = "ok" if worst <= a.tolerance else "FAILED"
    print(f"tfjs_reference: {a.model_json}: worst {worst:.2e}, tolerance {a.tolerance:.0e}: {verdict}")
    sys.exit(0 if worst <= a.tolerance else 1)


if __name__ == "__main__":
    main()
