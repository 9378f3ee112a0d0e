#!/usr/bin/env python3
"""Converts a TensorFlow.js graph model to ONNX with numpy and onnx alone.

    tfjs_to_onnx.py MODEL.json OUT.onnx [--float-inputs] [--outputs NAME ...]

A general converter over the TF op set of graph models (convolutions, fused
activations, element-wise maths, reductions, resizes, reshapes, slices,
gathers, top-k): every op it meets is translated one to one, and an op it does
not know fails the conversion with its name. Tensors keep TF's NHWC layout;
convolutions, pooling and resizes run in NCHW between two transposes (both
runtimes fold them). `--float-inputs` declares int32 image inputs as float32
(MoveNet casts its int32 image to float first thing), since camdnnd feeds
float tensors. The result is checked against scripts/tfjs_reference.py, a
numpy executor of the same graph.
"""

import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, __import__("os").path.dirname(__file__))
from tfjs_graph import TfjsError, load, np_dtype, split_ref  # noqa: E402

OPSET = 13
ONNX_DTYPE = {
    np.float32: TensorProto.FLOAT,
    np.int32: TensorProto.INT32,
    np.int64: TensorProto.INT64,
    np.bool_: TensorProto.BOOL,
}


def onnx_dtype(tf_type):
    return ONNX_DTYPE[np_dtype(tf_type)]


class Converter:
    """Builds the ONNX graph node by node."""

    def __init__(self, graph, float_inputs):
        self.g = graph
        self.float_inputs = float_inputs
        self.nodes = []
        self.inits = {}
        self.by_name = {n.name: n for n in graph.nodes}
        self.uid = 0

    # -- helpers --------------------------------------------------------
    def fresh(self, base):
        self.uid += 1
        return f"{base}__{self.uid}"

    def ref(self, r):
        """ONNX tensor name of TF input reference `r` (Consts become initializers)."""
        name, k = split_ref(r)
        if name in self.g.consts:
            if name not in self.inits:
                self.inits[name] = numpy_helper.from_array(self.g.consts[name], name)
            return name
        return name if k == 0 else f"{name}:{k}"

    def const_of(self, node, i):
        """The constant value of input `i` (shape, axis, size arguments)."""
        name, _ = split_ref(node.inputs[i])
        src = self.by_name.get(name)
        while src is not None and src.op == "Identity" and name not in self.g.consts:
            name, _ = split_ref(src.inputs[0])
            src = self.by_name.get(name)
        if name not in self.g.consts:
            raise TfjsError(f"{node.op} {node.name}: input {i} ({node.inputs[i]}) must be a constant")
        return self.g.consts[name]

    def init(self, value, base):
        name = self.fresh(base)
        self.inits[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def add(self, op, inputs, outputs=None, name=None, **attrs):
        outputs = outputs or [self.fresh(name or op)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=self.fresh(op), **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def nchw(self, x):
        return self.add("Transpose", [x], perm=[0, 3, 1, 2])

    def nhwc(self, x, out):
        return self.add("Transpose", [x], [out], perm=[0, 2, 3, 1])

    def activation(self, kind, x, node, args, out):
        """Applies a fused activation (`kind`) to x, writing `out`."""
        if kind is None:
            return self.add("Identity", [x], [out])
        if kind == "Relu":
            return self.add("Relu", [x], [out])
        if kind == "Relu6":
            return self.add("Clip", [x, self.init(np.float32(0), "zero"), self.init(np.float32(6), "six")], [out])
        if kind == "Elu":
            return self.add("Elu", [x], [out])
        if kind == "Sigmoid":
            return self.add("Sigmoid", [x], [out])
        if kind == "LeakyRelu":
            return self.add("LeakyRelu", [x], [out], alpha=node.a_float("leakyrelu_alpha", 0.2))
        if kind == "Prelu":
            return self.add("PRelu", [x, self.ref(args[1])], [out])
        raise TfjsError(f"{node.op} {node.name}: fused activation {kind} unsupported")

    def fused(self, node, n_main):
        """(bias ref or None, activation or None, extra args) of a _Fused* node."""
        ops = node.a_strs("fused_ops")
        args = node.inputs[n_main:]
        bias, act = None, None
        if ops and ops[0] == "BiasAdd":
            bias, ops = args[0], ops[1:]
        elif ops:
            raise TfjsError(f"{node.op} {node.name}: fused ops {ops} unsupported (BiasAdd first expected)")
        if len(ops) > 1:
            raise TfjsError(f"{node.op} {node.name}: fused ops {ops} unsupported")
        if ops:
            act = ops[0]
        return bias, act, args

    def conv_attrs(self, node):
        if node.a_str("data_format", "NHWC") != "NHWC":
            raise TfjsError(f"{node.op} {node.name}: only NHWC is supported")
        s = node.a_ints("strides") or [1, 1, 1, 1]
        d = node.a_ints("dilations") or [1, 1, 1, 1]
        attrs = {"strides": s[1:3], "dilations": d[1:3]}
        pad = node.a_str("padding")
        if pad == "SAME":
            attrs["auto_pad"] = "SAME_UPPER"
        elif pad == "VALID":
            attrs["pads"] = [0, 0, 0, 0]
        elif pad == "EXPLICIT":
            p = node.a_ints("explicit_paddings")
            attrs["pads"] = [p[2], p[4], p[3], p[5]]
        else:
            raise TfjsError(f"{node.op} {node.name}: padding {pad!r} unsupported")
        return attrs

    # -- ops -------------------------------------------------------------
    def conv(self, node, depthwise):
        w = self.const_of(node, 1)
        kh, kw, cin, cout = w.shape
        if depthwise:
            w_onnx = w.transpose(2, 3, 0, 1).reshape(cin * cout, 1, kh, kw)
            group = cin
        else:
            w_onnx = w.transpose(3, 2, 0, 1)
            group = 1
        bias, act, args = self.fused(node, 2) if node.op.startswith(("_Fused", "Fused")) else (None, None, [])
        ins = [self.nchw(self.ref(node.inputs[0])), self.init(np.ascontiguousarray(w_onnx), "w")]
        if bias is not None:
            ins.append(self.ref(bias))
        y = self.add("Conv", ins, group=group, **self.conv_attrs(node))
        if act is not None:
            y = self.activation(act, y, node, args, self.fresh("act"))
        self.nhwc(y, node.name)

    def matmul(self, node):
        a, b = self.ref(node.inputs[0]), self.ref(node.inputs[1])
        if node.a_bool("transpose_a"):
            a = self.add("Transpose", [a], perm=[1, 0])
        if node.a_bool("transpose_b"):
            b = self.add("Transpose", [b], perm=[1, 0])
        y = self.add("MatMul", [a, b])
        if node.op == "_FusedMatMul":
            bias, act, args = self.fused(node, 2)
            if bias is not None:
                y = self.add("Add", [y, self.ref(bias)])
            self.activation(act, y, node, args, node.name)
        else:
            self.add("Identity", [y], [node.name])

    def pool(self, node, onnx_op):
        k = node.a_ints("ksize")
        attrs = self.conv_attrs(node)
        attrs.pop("dilations")
        y = self.add(onnx_op, [self.nchw(self.ref(node.inputs[0]))], kernel_shape=k[1:3], **attrs)
        self.nhwc(y, node.name)

    def resize(self, node, mode):
        size = self.const_of(node, 1).astype(np.int64)
        if node.a_bool("align_corners"):
            ctm = "align_corners"
        elif node.a_bool("half_pixel_centers"):
            ctm = "half_pixel" if mode == "linear" else "tf_half_pixel_for_nn"
        else:
            ctm = "asymmetric"
        x = self.nchw(self.ref(node.inputs[0]))
        nc = self.add("Slice", [self.add("Shape", [x]), self.init(np.array([0], np.int64), "s"),
                                self.init(np.array([2], np.int64), "e")])
        sizes = self.add("Concat", [nc, self.init(size, "hw")], axis=0)
        extra = {"nearest_mode": "floor" if ctm == "asymmetric" else "round_prefer_ceil"} if mode == "nearest" else {}
        y = self.add("Resize", [x, "", "", sizes], mode=mode, coordinate_transformation_mode=ctm, **extra)
        self.nhwc(y, node.name)

    def strided_slice(self, node):
        begin, end, strides = (self.const_of(node, i).astype(np.int64) for i in (1, 2, 3))
        if node.a_int("ellipsis_mask", 0) or node.a_int("new_axis_mask", 0):
            raise TfjsError(f"StridedSlice {node.name}: ellipsis and new-axis masks unsupported")
        bm, em, sm = (node.a_int(k, 0) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
        big = np.iinfo(np.int64).max
        starts, ends = [], []
        for i in range(len(begin)):
            neg = strides[i] < 0
            b = (big if neg else 0) if bm >> i & 1 else begin[i]
            e = (-big if neg else big) if em >> i & 1 else end[i]
            if sm >> i & 1:
                e = b + 1 if b != -1 else big
            starts.append(b)
            ends.append(e)
        axes = list(range(len(begin)))
        y = self.add("Slice", [self.ref(node.inputs[0]), self.init(np.array(starts), "st"),
                               self.init(np.array(ends), "en"), self.init(np.array(axes, np.int64), "ax"),
                               self.init(strides, "sp")])
        shrink = [i for i in axes if sm >> i & 1]
        if shrink:
            self.add("Squeeze", [y, self.init(np.array(shrink, np.int64), "sq")], [node.name])
        else:
            self.add("Identity", [y], [node.name])

    def floor_div(self, node):
        a, b = self.ref(node.inputs[0]), self.ref(node.inputs[1])
        dt = node.a_type("T")
        if dt == "DT_FLOAT":
            self.add("Floor", [self.add("Div", [a, b])], [node.name])
            return
        fa = self.add("Cast", [a], to=TensorProto.FLOAT)
        fb = self.add("Cast", [b], to=TensorProto.FLOAT)
        q = self.add("Floor", [self.add("Div", [fa, fb])])
        self.add("Cast", [q], [node.name], to=onnx_dtype(dt))

    def floor_mod(self, node):
        a, b = self.ref(node.inputs[0]), self.ref(node.inputs[1])
        if node.a_type("T") == "DT_FLOAT":
            q = self.add("Floor", [self.add("Div", [a, b])])
            self.add("Sub", [a, self.add("Mul", [q, b])], [node.name])
        else:
            self.add("Mod", [a, b], [node.name], fmod=0)

    def convert_node(self, node):
        op, n, ins = node.op, node.name, node.inputs
        r = [self.ref(i) for i in ins] if op not in ("Const", "Placeholder") else []
        binary = {"Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div",
                  "Minimum": "Min", "Maximum": "Max", "Equal": "Equal", "Greater": "Greater",
                  "Less": "Less", "Pow": "Pow"}
        unary = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log",
                 "Tanh": "Tanh", "Neg": "Neg", "Abs": "Abs", "Floor": "Floor", "Identity": "Identity",
                 "Elu": "Elu"}
        if op in ("Const", "NoOp"):
            return
        if op == "Placeholder":
            return  # graph input, declared in run()
        if op in binary:
            self.add(binary[op], r[:2], [n])
        elif op in unary:
            self.add(unary[op], r[:1], [n])
        elif op == "Relu6":
            self.activation("Relu6", r[0], node, ins, n)
        elif op == "Rsqrt":
            self.add("Reciprocal", [self.add("Sqrt", r[:1])], [n])
        elif op == "Square":
            self.add("Mul", [r[0], r[0]], [n])
        elif op == "SquaredDifference":
            d = self.add("Sub", r[:2])
            self.add("Mul", [d, d], [n])
        elif op == "FloorDiv":
            self.floor_div(node)
        elif op == "FloorMod":
            self.floor_mod(node)
        elif op in ("Conv2D", "_FusedConv2D"):
            self.conv(node, depthwise=False)
        elif op in ("DepthwiseConv2dNative", "FusedDepthwiseConv2dNative"):
            self.conv(node, depthwise=True)
        elif op in ("MatMul", "_FusedMatMul"):
            self.matmul(node)
        elif op == "MaxPool":
            self.pool(node, "MaxPool")
        elif op == "AvgPool":
            self.pool(node, "AveragePool")
        elif op == "ResizeBilinear":
            self.resize(node, "linear")
        elif op == "ResizeNearestNeighbor":
            self.resize(node, "nearest")
        elif op in ("Mean", "Sum", "Max", "Min", "Prod"):
            axes = [int(a) for a in np.atleast_1d(self.const_of(node, 1))]
            red = {"Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin",
                   "Prod": "ReduceProd"}[op]
            keep = int(node.a_bool("keep_dims"))
            if red == "ReduceSum":
                self.add(red, [r[0], self.init(np.array(axes, np.int64), "ax")], [n], keepdims=keep)
            else:
                self.add(red, [r[0]], [n], axes=axes, keepdims=keep)
        elif op == "Softmax":
            self.add("Softmax", [r[0]], [n], axis=-1)
        elif op == "ConcatV2":
            axis = int(self.const_of(node, len(ins) - 1))
            self.add("Concat", r[:-1], [n], axis=axis)
        elif op == "Pack":
            axis = node.a_int("axis", 0)
            ax = self.init(np.array([axis], np.int64), "ax")
            self.add("Concat", [self.add("Unsqueeze", [x, ax]) for x in r], [n], axis=axis)
        elif op == "Unpack":
            axis, num = node.a_int("axis", 0), node.a_int("num")
            ax = self.init(np.array([axis], np.int64), "ax")
            parts = self.add("Split", [r[0]], [self.fresh("part") for _ in range(num)], axis=axis)
            parts = [parts] if num == 1 else parts
            for k, p in enumerate(parts):
                self.add("Squeeze", [p, ax], [n if k == 0 else f"{n}:{k}"])
        elif op == "Reshape":
            shape = self.const_of(node, 1).astype(np.int64)
            self.add("Reshape", [r[0], self.init(shape, "shape")], [n])
        elif op == "ExpandDims":
            axis = int(self.const_of(node, 1))
            self.add("Unsqueeze", [r[0], self.init(np.array([axis], np.int64), "ax")], [n])
        elif op == "Squeeze":
            dims = node.a_ints("squeeze_dims")
            if not dims:
                raise TfjsError(f"Squeeze {n}: squeeze_dims must be given")
            self.add("Squeeze", [r[0], self.init(np.array(dims, np.int64), "ax")], [n])
        elif op == "Cast":
            self.add("Cast", [r[0]], [n], to=onnx_dtype(node.a_type("DstT")))
        elif op == "Pad":
            p = self.const_of(node, 1).astype(np.int64)
            pads = np.concatenate([p[:, 0], p[:, 1]])
            self.add("Pad", [r[0], self.init(pads, "pads")], [n], mode="constant")
        elif op == "StridedSlice":
            self.strided_slice(node)
        elif op == "GatherV2":
            if node.a_int("batch_dims", 0):
                raise TfjsError(f"GatherV2 {n}: batch_dims unsupported")
            self.add("Gather", r[:2], [n], axis=int(self.const_of(node, 2)))
        elif op == "GatherNd":
            idx = self.add("Cast", [r[1]], to=TensorProto.INT64)
            self.add("GatherND", [r[0], idx], [n])
        elif op == "TopKV2":
            k = np.array([int(self.const_of(node, 1))], np.int64)
            vals, idx = self.add("TopK", [r[0], self.init(k, "k")], [n, self.fresh("idx64")],
                                 axis=-1, largest=1, sorted=1)
            self.add("Cast", [idx], [f"{n}:1"], to=TensorProto.INT32)
        elif op == "ArgMax":
            axis = int(self.const_of(node, 1))
            y = self.add("ArgMax", [r[0]], axis=axis, keepdims=0)
            self.add("Cast", [y], [n], to=onnx_dtype(node.a_type("output_type")))
        else:
            raise TfjsError(f"op {op} ({n}) is not supported by this converter")

    def run(self, outputs):
        inputs = []
        for name in self.g.inputs:
            node = self.by_name[name]
            dt = node.a_type("dtype")
            if dt == "DT_INT32" and self.float_inputs:
                dt = "DT_FLOAT"
            shape = [d if d >= 0 else "N" for d in self.g.placeholder_shape(node)]
            inputs.append(helper.make_tensor_value_info(name, onnx_dtype(dt), shape))
        for node in self.g.nodes:
            self.convert_node(node)
        outs = []
        for o in outputs:
            name, k = split_ref(o)
            tensor = name if k == 0 else f"{name}:{k}"
            outs.append(helper.make_tensor_value_info(tensor, TensorProto.UNDEFINED, None))
        graph = helper.make_graph(self.nodes, "tfjs", inputs, outs, list(self.inits.values()))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="camdnn scripts/tfjs_to_onnx.py")
        model.ir_version = 8  # opset 13; what ONNX Runtime and tract both read
        model = prune(model)
        model = onnx.shape_inference.infer_shapes(model)
        # Output types from inference (declared UNDEFINED above).
        known = {v.name: v for v in list(model.graph.value_info)}
        for out in model.graph.output:
            if out.name in known:
                out.type.CopyFrom(known[out.name].type)
        onnx.checker.check_model(model)
        return model


def prune(model):
    """Drops nodes and initializers no output depends on."""
    g = model.graph
    needed = {o.name for o in g.output}
    keep = []
    for node in reversed(g.node):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [i for i in g.initializer if i.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)
    return model


def convert(model_json, float_inputs=False, outputs=None):
    """The ONNX model of a TF.js graph model."""
    graph = load(model_json)
    return Converter(graph, float_inputs).run(outputs or graph.outputs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_json")
    ap.add_argument("out")
    ap.add_argument("--float-inputs", action="store_true", help="declare int32 inputs as float32")
    ap.add_argument("--outputs", nargs="+", help="output tensors (default: the signature's)")
    a = ap.parse_args()
    try:
        model = convert(a.model_json, a.float_inputs, a.outputs)
    except TfjsError as e:
        sys.exit(f"tfjs_to_onnx: {a.model_json}: {e}")
    onnx.save(model, a.out)
    print(f"tfjs_to_onnx: wrote {a.out} ({len(model.graph.node)} nodes)")


if __name__ == "__main__":
    main()
