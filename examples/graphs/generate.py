#!/usr/bin/env python3
"""Writes the example graphs of examples/graphs/ (memplan.graph version 1).

    python3 examples/graphs/generate.py            # diamond, mlp-train, resnet-block-train
    build/bin/memplan import-csv data/minimalloc-challenging/A.1048576.csv \
        --name minimalloc-A -o examples/graphs/minimalloc-A.json

The layout (one tensor or op a line, fixed field order) is the one memplan's
own writer uses, so `memplan` can rewrite these files without a diff.
Costs are in milliseconds of a mid-range GPU, estimated from FLOPs and bytes
moved; sizes are exact for fp32 tensors.
"""
import json
import os

FP32 = 4


class Graph:
    def __init__(self, name):
        self.name = name
        self.tensors = []
        self.ops = []
        self.outputs = []
        self._names = set()

    def tensor(self, name, nbytes, persistent=False):
        assert name not in self._names, name
        self._names.add(name)
        t = {"name": name, "bytes": int(nbytes)}
        if persistent:
            t["persistent"] = True
        self.tensors.append(t)
        return name

    def op(self, name, inputs, outputs, cost=1.0, workspace=0, phase="forward", variants=None, inplace=None):
        for t in list(inputs) + list(outputs):
            assert t in self._names, (name, t)
        o = {"name": name, "inputs": list(inputs), "outputs": list(outputs), "cost": float("%.4g" % cost),
             "workspace": int(workspace), "phase": phase}
        if variants:
            o["variants"] = [{"name": n, "cost": float("%.4g" % c), "workspace": int(w)} for n, c, w in variants]
        if inplace:
            o["inplace"] = [list(p) for p in inplace]
        self.ops.append(o)

    def text(self):
        def items(key, xs):
            if not xs:
                return '  "%s": []' % key
            return '  "%s": [\n    ' % key + ",\n    ".join(json.dumps(x) for x in xs) + "\n  ]"

        return ("{\n"
                '  "format": "memplan.graph",\n'
                '  "version": 1,\n'
                '  "name": %s,\n' % json.dumps(self.name)
                + items("tensors", self.tensors) + ",\n"
                + items("ops", self.ops) + ",\n"
                + '  "outputs": %s\n' % json.dumps(self.outputs)
                + "}\n")


def diamond():
    # After MODeL/OLLA (Steiner et al., ICML 2023): edges A->B 10, B->C 20, B->D 30, D->E 40, E->F 50, C->F 60,
    # F->G 10, here in MiB. Listed order A B C D E F G peaks at 150 MiB;
    # A B D E C F G at 130 MiB.
    g = Graph("diamond")
    for name, size in [("a", 10), ("bc", 20), ("bd", 30), ("de", 40), ("ef", 50), ("cf", 60), ("g", 10)]:
        g.tensor(name, size << 20)
    g.op("A", [], ["a"])
    g.op("B", ["a"], ["bc", "bd"])
    g.op("C", ["bc"], ["cf"])
    g.op("D", ["bd"], ["de"])
    g.op("E", ["de"], ["ef"])
    g.op("F", ["cf", "ef"], ["g"])
    g.op("G", ["g"], [])
    return g


def mlp_train():
    # One SGD step of a 784-512-256-10 MLP, batch 64: forward, loss, backward,
    # update. Weights are persistent and updated in place by the update ops
    # (no output: the step mutates the persistent buffer). The ReLUs run in
    # place, as do their backward ops; fc1 has two GEMM variants.
    g = Graph("mlp-train")
    batch, dims = 64, [784, 512, 256, 10]
    gflops = 5000.0  # ~5 TFLOP/s: cost (ms) = flop / 5e9

    def mm_cost(m, n, k):
        return 2.0 * m * n * k / (gflops * 1e6)

    g.tensor("x", batch * dims[0] * FP32)
    g.tensor("labels", batch * 8)  # int64 class ids
    for i in range(3):
        g.tensor("fc%d.w" % (i + 1), dims[i] * dims[i + 1] * FP32, persistent=True)
        g.tensor("fc%d.b" % (i + 1), dims[i + 1] * FP32, persistent=True)
    for i, d in enumerate(dims[1:3]):
        g.tensor("h%d" % (i + 1), batch * d * FP32)
        g.tensor("a%d" % (i + 1), batch * d * FP32)
    g.tensor("logits", batch * dims[3] * FP32)
    g.tensor("loss", FP32)
    g.tensor("dlogits", batch * dims[3] * FP32)
    for i in (2, 1):
        g.tensor("da%d" % i, batch * dims[i] * FP32)
        g.tensor("dh%d" % i, batch * dims[i] * FP32)
    for i in range(3):
        g.tensor("fc%d.dw" % (i + 1), dims[i] * dims[i + 1] * FP32)
        g.tensor("fc%d.db" % (i + 1), dims[i + 1] * FP32)

    relu_cost = 0.002
    c1 = mm_cost(batch, dims[1], dims[0])
    g.op("fc1", ["x", "fc1.w", "fc1.b"], ["h1"], cost=c1,
         variants=[("gemm_splitk", 0.8 * c1, 1 << 20), ("gemm", c1, 0)])
    g.op("relu1", ["h1"], ["a1"], cost=relu_cost, inplace=[("h1", "a1")])
    g.op("fc2", ["a1", "fc2.w", "fc2.b"], ["h2"], cost=mm_cost(batch, dims[2], dims[1]))
    g.op("relu2", ["h2"], ["a2"], cost=relu_cost, inplace=[("h2", "a2")])
    g.op("fc3", ["a2", "fc3.w", "fc3.b"], ["logits"], cost=mm_cost(batch, dims[3], dims[2]))
    g.op("loss", ["logits", "labels"], ["loss"], cost=0.003)

    g.op("loss_bwd", ["logits", "labels"], ["dlogits"], cost=0.003, phase="backward")
    g.op("fc3_bwd", ["dlogits", "a2", "fc3.w"], ["da2", "fc3.dw", "fc3.db"],
         cost=2 * mm_cost(batch, dims[3], dims[2]), phase="backward")
    g.op("relu2_bwd", ["da2", "a2"], ["dh2"], cost=relu_cost, phase="backward", inplace=[("da2", "dh2")])
    g.op("fc2_bwd", ["dh2", "a1", "fc2.w"], ["da1", "fc2.dw", "fc2.db"],
         cost=2 * mm_cost(batch, dims[2], dims[1]), phase="backward")
    g.op("relu1_bwd", ["da1", "a1"], ["dh1"], cost=relu_cost, phase="backward", inplace=[("da1", "dh1")])
    # The first layer needs no gradient for x: only the weight gradients.
    g.op("fc1_bwd", ["dh1", "x", "fc1.w"], ["fc1.dw", "fc1.db"], cost=mm_cost(batch, dims[1], dims[0]),
         phase="backward")
    for i in range(3):
        n = i + 1
        g.op("sgd.fc%d" % n, ["fc%d.w" % n, "fc%d.b" % n, "fc%d.dw" % n, "fc%d.db" % n], [],
             cost=dims[i] * dims[i + 1] * FP32 * 3 / 500e6, phase="update")
    g.outputs = ["loss"]
    return g


def resnet_block_train():
    # Two ResNet basic blocks (ResNet-18's first stage) at batch 32, 56x56x64
    # fp32, with a small head (global average pool, fc, cross-entropy), their
    # backward pass and an SGD-with-momentum update. Convolutions have cuDNN-
    # like algorithm variants with their own workspace; ReLUs, the residual add
    # and the ReLU backward run in place. b1.dx, the gradient of the stage's
    # input, is a graph output: it goes on to the stem's backward pass.
    g = Graph("resnet-block-train")
    n, c, h, w = 32, 64, 56, 56
    act = n * c * h * w * FP32            # (N, C, H, W) = 25,690,112 bytes
    conv_w = c * c * 3 * 3 * FP32         # (C_out, C_in, 3, 3)
    vec = c * FP32                        # per-channel BN parameters and statistics
    conv_ms = 2.0 * n * h * w * c * c * 9 / 10e9  # ~10 TFLOP/s
    eltwise_ms = act * 2 / 900e6                    # read + write at ~900 GB/s
    winograd_ws = 60555264
    fwd_variants = [("implicit_precomp_gemm", 0.95 * conv_ms, 1179648), ("implicit_gemm", 1.3 * conv_ms, 0),
                    ("winograd_nonfused", 0.62 * conv_ms, winograd_ws)]
    bwd_data_variants = [("algo_1", conv_ms, 0), ("winograd_nonfused", 0.7 * conv_ms, winograd_ws)]
    bwd_filter_variants = [("algo_1", 1.1 * conv_ms, 3670016), ("algo_0", 1.8 * conv_ms, 0),
                           ("winograd_nonfused", 0.75 * conv_ms, winograd_ws)]

    params = []  # (name, bytes): each gets a momentum buffer and an update op

    g.tensor("x", act)
    g.tensor("labels", n * 8)
    for b in ("b1", "b2"):
        for conv in ("conv1", "conv2"):
            params.append(("%s.%s.w" % (b, conv), conv_w))
        for bn in ("bn1", "bn2"):
            params.append(("%s.%s.gamma" % (b, bn), vec))
            params.append(("%s.%s.beta" % (b, bn), vec))
            g.tensor("%s.%s.running_mean" % (b, bn), vec, persistent=True)
            g.tensor("%s.%s.running_var" % (b, bn), vec, persistent=True)
    params += [("fc.w", c * 10 * FP32), ("fc.b", 10 * FP32)]
    for p, size in params:
        g.tensor(p, size, persistent=True)
        g.tensor(p + ".momentum", size, persistent=True)

    # Forward.
    xin = "x"
    for b in ("b1", "b2"):
        for t in ("c1", "n1", "r1", "c2", "n2", "s", "y"):
            g.tensor("%s.%s" % (b, t), act)
        for bn in ("bn1", "bn2"):
            g.tensor("%s.%s.mean" % (b, bn), vec)
            g.tensor("%s.%s.invstd" % (b, bn), vec)

        def bn_forward(bn, src, dst):
            g.op("%s.%s" % (b, bn), [src, "%s.%s.gamma" % (b, bn), "%s.%s.beta" % (b, bn),
                                     "%s.%s.running_mean" % (b, bn), "%s.%s.running_var" % (b, bn)],
                 [dst, "%s.%s.mean" % (b, bn), "%s.%s.invstd" % (b, bn)], cost=2 * eltwise_ms)

        g.op(b + ".conv1", [xin, b + ".conv1.w"], [b + ".c1"], cost=conv_ms, variants=fwd_variants)
        bn_forward("bn1", b + ".c1", b + ".n1")
        g.op(b + ".relu1", [b + ".n1"], [b + ".r1"], cost=eltwise_ms, inplace=[(b + ".n1", b + ".r1")])
        g.op(b + ".conv2", [b + ".r1", b + ".conv2.w"], [b + ".c2"], cost=conv_ms, variants=fwd_variants)
        bn_forward("bn2", b + ".c2", b + ".n2")
        g.op(b + ".add", [b + ".n2", xin], [b + ".s"], cost=1.5 * eltwise_ms, inplace=[(b + ".n2", b + ".s")])
        g.op(b + ".relu2", [b + ".s"], [b + ".y"], cost=eltwise_ms, inplace=[(b + ".s", b + ".y")])
        xin = b + ".y"

    g.tensor("pooled", n * c * FP32)
    g.tensor("logits", n * 10 * FP32)
    g.tensor("loss", FP32)
    g.op("pool", [xin], ["pooled"], cost=eltwise_ms / 2)
    g.op("fc", ["pooled", "fc.w", "fc.b"], ["logits"], cost=0.01)
    g.op("loss", ["logits", "labels"], ["loss"], cost=0.01)

    # Backward.
    g.tensor("dlogits", n * 10 * FP32)
    g.tensor("dpooled", n * c * FP32)
    g.tensor("fc.w.grad", c * 10 * FP32)
    g.tensor("fc.b.grad", 10 * FP32)
    g.op("loss_bwd", ["logits", "labels"], ["dlogits"], cost=0.01, phase="backward")
    g.op("fc_bwd", ["dlogits", "pooled", "fc.w"], ["dpooled", "fc.w.grad", "fc.b.grad"], cost=0.02,
         phase="backward")
    g.tensor("b2.dy", act)
    g.op("pool_bwd", ["dpooled"], ["b2.dy"], cost=eltwise_ms / 2, phase="backward")
    for b, block_in, dx in (("b2", "b1.y", "b1.dy"), ("b1", "x", "b1.dx")):
        for t in ("ds", "dc2", "dr1", "dn1", "dc1", "dx_main"):
            g.tensor("%s.%s" % (b, t), act)
        g.tensor(dx, act)
        for p in ("conv1.w", "conv2.w", "bn1.gamma", "bn1.beta", "bn2.gamma", "bn2.beta"):
            g.tensor("%s.%s.grad" % (b, p), conv_w if p.startswith("conv") else vec)

        def bn_backward(bn, dy, x, dx_):
            g.op("%s.%s_bwd" % (b, bn), [dy, x, "%s.%s.gamma" % (b, bn), "%s.%s.mean" % (b, bn),
                                         "%s.%s.invstd" % (b, bn)],
                 [dx_, "%s.%s.gamma.grad" % (b, bn), "%s.%s.beta.grad" % (b, bn)], cost=3 * eltwise_ms,
                 phase="backward")

        def conv_backward(conv, dy, x, dx_):
            g.op("%s.%s_bwd_data" % (b, conv), [dy, "%s.%s.w" % (b, conv)], [dx_], cost=conv_ms,
                 phase="backward", variants=bwd_data_variants)
            g.op("%s.%s_bwd_filter" % (b, conv), [dy, x], ["%s.%s.w.grad" % (b, conv)], cost=conv_ms,
                 phase="backward", variants=bwd_filter_variants)

        g.op(b + ".relu2_bwd", [b + ".dy", b + ".y"], [b + ".ds"], cost=1.5 * eltwise_ms, phase="backward",
             inplace=[(b + ".dy", b + ".ds")])
        # The add passes ds unchanged to both branches: no op of its own.
        bn_backward("bn2", b + ".ds", b + ".c2", b + ".dc2")
        conv_backward("conv2", b + ".dc2", b + ".r1", b + ".dr1")
        g.op(b + ".relu1_bwd", [b + ".dr1", b + ".r1"], [b + ".dn1"], cost=1.5 * eltwise_ms, phase="backward",
             inplace=[(b + ".dr1", b + ".dn1")])
        bn_backward("bn1", b + ".dn1", b + ".c1", b + ".dc1")
        conv_backward("conv1", b + ".dc1", block_in, b + ".dx_main")
        g.op(b + ".grad_sum", [b + ".dx_main", b + ".ds"], [dx], cost=1.5 * eltwise_ms, phase="backward",
             inplace=[(b + ".dx_main", dx)])

    # Update: SGD with momentum, in place on the persistent parameters.
    for p, size in params:
        g.op("sgd." + p, [p, p + ".grad", p + ".momentum"], [], cost=size * 5 / 900e6, phase="update")
    g.outputs = ["loss", "b1.dx"]
    return g


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for g in (diamond(), mlp_train(), resnet_block_train()):
        with open(os.path.join(here, g.name + ".json"), "w") as f:
            f.write(g.text())


if __name__ == "__main__":
    main()
