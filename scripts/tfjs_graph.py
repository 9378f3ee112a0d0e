"""Reads a TensorFlow.js graph model (model.json + its weight shards) into plain
Python: the nodes in file order, the constants as numpy arrays, and the
signature's inputs and outputs. Shared by the ONNX converter
(scripts/tfjs_to_onnx.py) and the numpy reference executor
(scripts/tfjs_reference.py), which check each other.

Only numpy is needed. Weights may be float32, int32, bool, or quantized
(float16, uint8/uint16 with scale and min) as the TF.js converter writes them.
"""

import base64
import json
import os
from dataclasses import dataclass, field

import numpy as np


class TfjsError(Exception):
    """A model file that this reader or the converter cannot handle, with why."""


DTYPES = {
    "float32": np.float32,
    "int32": np.int32,
    "bool": np.bool_,
    "DT_FLOAT": np.float32,
    "DT_INT32": np.int32,
    "DT_BOOL": np.bool_,
    "DT_INT64": np.int64,
}


def np_dtype(name):
    """numpy dtype of a TF / TF.js dtype name; fails loudly on others."""
    try:
        return DTYPES[name]
    except KeyError:
        raise TfjsError(f"unsupported dtype {name!r}") from None


@dataclass
class Node:
    """One graph node: op, inputs (`name` or `name:k`; control inputs dropped), attrs."""

    name: str
    op: str
    inputs: list
    attr: dict = field(default_factory=dict)

    def a_type(self, key):
        return self.attr[key]["type"]

    def a_int(self, key, default=None):
        v = self.attr.get(key)
        if v is None:
            if default is None:
                raise TfjsError(f"{self.op} {self.name}: attribute {key} missing")
            return default
        return int(v.get("i", 0))

    def a_float(self, key, default=0.0):
        v = self.attr.get(key)
        return float(v.get("f", default)) if v is not None else default

    def a_bool(self, key, default=False):
        v = self.attr.get(key)
        return bool(v.get("b", False)) if v is not None else default

    def a_str(self, key, default=""):
        v = self.attr.get(key)
        if v is None or "s" not in v:
            return default
        return base64.b64decode(v["s"]).decode()

    def a_ints(self, key):
        v = self.attr.get(key, {}).get("list", {})
        return [int(x) for x in v.get("i", [])]

    def a_strs(self, key):
        v = self.attr.get(key, {}).get("list", {})
        return [base64.b64decode(x).decode() for x in v.get("s", [])]


@dataclass
class Graph:
    """A loaded graph model."""

    nodes: list
    consts: dict
    inputs: list
    outputs: list

    def placeholder_shape(self, node):
        dims = node.attr.get("shape", {}).get("shape", {}).get("dim", [])
        return [int(d.get("size", -1)) for d in dims]


def split_ref(ref):
    """`name:k` -> (name, k); `name` -> (name, 0)."""
    if ":" in ref:
        name, k = ref.rsplit(":", 1)
        if k.isdigit():
            return name, int(k)
    return ref, 0


def _read_weights(model_dir, manifest):
    out = {}
    for group in manifest:
        buf = b"".join(open(os.path.join(model_dir, p), "rb").read() for p in group["paths"])
        off = 0
        for w in group["weights"]:
            shape = [int(s) for s in w["shape"]]
            count = int(np.prod(shape)) if shape else 1
            q = w.get("quantization")
            if q:
                qdt = {"float16": np.float16, "uint8": np.uint8, "uint16": np.uint16}.get(q["dtype"])
                if qdt is None:
                    raise TfjsError(f"weight {w['name']}: quantization {q['dtype']} unsupported")
                nbytes = count * np.dtype(qdt).itemsize
                raw = np.frombuffer(buf, dtype=qdt, count=count, offset=off)
                if qdt == np.float16:
                    val = raw.astype(np.float32)
                else:
                    val = raw.astype(np.float32) * np.float32(q["scale"]) + np.float32(q["min"])
                val = val.astype(np_dtype(w["dtype"]))
            else:
                dt = np_dtype(w["dtype"])
                nbytes = count * np.dtype(dt).itemsize
                val = np.frombuffer(buf, dtype=dt, count=count, offset=off).copy()
            if off + nbytes > len(buf):
                raise TfjsError(f"weight {w['name']} runs past the end of its shard")
            off += nbytes
            out[w["name"]] = val.reshape(shape)
        if off != len(buf):
            raise TfjsError(f"weight shards {group['paths']} hold {len(buf) - off} unread bytes")
    return out


def _signature_names(sig, key, nodes, op):
    if sig and sig.get(key):
        return [v["name"] if "name" in v else k for k, v in sig[key].items()]
    if op:
        return [n.name for n in nodes if n.op == op]
    return []


def load(model_json):
    """Loads `model.json` and the weight shards it names (same folder)."""
    with open(model_json) as f:
        j = json.load(f)
    if j.get("format") not in (None, "graph-model"):
        raise TfjsError(f"{model_json}: format {j.get('format')!r} is not a graph model")
    topo = j["modelTopology"]
    if topo.get("library", {}).get("function"):
        raise TfjsError(f"{model_json}: graph functions (control flow) are not supported")
    nodes = []
    for n in topo["node"]:
        inputs = [i for i in n.get("input", []) if not i.startswith("^")]
        nodes.append(Node(n["name"], n["op"], inputs, n.get("attr", {})))
    weights = _read_weights(os.path.dirname(os.path.abspath(model_json)), j["weightsManifest"])
    consts = {}
    for n in nodes:
        if n.op != "Const":
            continue
        if n.name not in weights:
            raise TfjsError(f"Const {n.name} has no weight (inline tensors are not supported)")
        consts[n.name] = weights[n.name]
    sig = j.get("signature") or topo.get("signature")
    inputs = [split_ref(s)[0] for s in _signature_names(sig, "inputs", nodes, "Placeholder")]
    outputs = _signature_names(sig, "outputs", nodes, None)
    if not outputs:
        # No signature: the nodes nothing else consumes.
        used = {split_ref(i)[0] for n in nodes for i in n.inputs}
        outputs = [n.name for n in nodes if n.name not in used and n.op != "Const"]
    return Graph(nodes, consts, inputs, outputs)
