#!/usr/bin/env python3
"""PyTorch peer of bench/gpu/train_gpu.c, and the ResNet-18 ONNX it trains.

    bench_train_gpu_torch.py --export-resnet18 OUT.onnx --batch 32
        torchvision ResNet-18 (random init, seed 18) written as ONNX with
        BatchNormalization nodes kept (training needs them; the inference
        export folds them): Conv (no bias) + BN + Relu, MaxPool 3x3/2,
        residual Add, GlobalAveragePool, Flatten, Gemm(transB=1) named
        fc.weight/fc.bias. Input "input" (B, 3, 224, 224), output "logits".
    bench_train_gpu_torch.py --model small-cnn|resnet18 --batch B
        [--head] [--optim adam|sgd] [--mode eager|graph] [--amp f16|bf16] [--steps N] [--warmup N]
        One JSON line: step time p50/mean (wall clock per step, inputs copied
        from pinned host memory, loss.item() each step: what edgert's step
        does), peak torch.cuda.max_memory_allocated.

Same recipes as train_gpu.c: small-cnn Adam lr 2e-3; ResNet-18 SGD
momentum 0.9 lr 0.01; --head trains fc only with the backbone in eval mode
(frozen BatchNorm). f32, TF32 off (edgert keeps f32 convs/GEMMs on FMA).
--amp: torch.autocast(cuda, f16|bf16) around forward + loss, and for f16 a
GradScaler (scale, unscale + inf check + step, update): PyTorch's AMP recipe.
Eager only (GradScaler's step reads found_inf on the host: not capturable).
"""
import argparse, json, sys, time

import numpy as np
import torch
import torch.nn as nn


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(1568, 64), nn.ReLU(), nn.Linear(64, 10))


def resnet18():
    import torchvision
    torch.manual_seed(18)
    return torchvision.models.resnet18(weights=None)


def export_resnet18(path, batch):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    m = resnet18().eval()
    sd = {k: v.detach().cpu().numpy() for k, v in m.state_dict().items()}
    inits, nodes = [], []
    def init(name):
        inits.append(numpy_helper.from_array(sd[name].astype(np.float32), name))
        return name
    cnt = [0]
    def nm(p):
        cnt[0] += 1
        return f"{p}_{cnt[0]}"
    def conv(x, w, stride, pad):
        y = nm("conv")
        k = sd[w].shape[2]
        nodes.append(helper.make_node("Conv", [x, init(w)], [y], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[pad] * 4))
        return y
    def bn(x, p):
        y = nm("bn")
        nodes.append(helper.make_node("BatchNormalization", [x, init(p + ".weight"), init(p + ".bias"),
                                      init(p + ".running_mean"), init(p + ".running_var")], [y],
                                      epsilon=1e-5, momentum=0.9))
        return y
    def relu(x):
        y = nm("relu")
        nodes.append(helper.make_node("Relu", [x], [y]))
        return y
    x = relu(bn(conv("input", "conv1.weight", 2, 3), "bn1"))
    y = nm("pool")
    nodes.append(helper.make_node("MaxPool", [x], [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x = y
    for li in range(1, 5):
        for bi in range(2):
            p = f"layer{li}.{bi}"
            stride = 2 if li > 1 and bi == 0 else 1
            h = relu(bn(conv(x, p + ".conv1.weight", stride, 1), p + ".bn1"))
            h = bn(conv(h, p + ".conv2.weight", 1, 1), p + ".bn2")
            sc = x
            if p + ".downsample.0.weight" in sd:
                sc = bn(conv(x, p + ".downsample.0.weight", stride, 0), p + ".downsample.1")
            s = nm("add")
            nodes.append(helper.make_node("Add", [h, sc], [s]))
            x = relu(s)
    g, f = nm("gap"), nm("flat")
    nodes.append(helper.make_node("GlobalAveragePool", [x], [g]))
    nodes.append(helper.make_node("Flatten", [g], [f], axis=1))
    nodes.append(helper.make_node("Gemm", [f, init("fc.weight"), init("fc.bias")], ["logits"], transB=1))
    graph = helper.make_graph(nodes, "resnet18_train",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export-resnet18")
    ap.add_argument("--model", default="small-cnn")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--head", action="store_true")
    ap.add_argument("--optim", default="sgd")
    ap.add_argument("--mode", default="eager")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--amp", default="")
    a = ap.parse_args()
    if a.export_resnet18:
        export_resnet18(a.export_resnet18, a.batch)
        return
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    torch.cuda.reset_peak_memory_stats()
    if a.model == "small-cnn":
        torch.manual_seed(1)
        net, shape, classes = small_cnn(), (a.batch, 1, 28, 28), 10
    else:
        net, shape, classes = resnet18(), (a.batch, 3, 224, 224), 1000
    net = net.to(dev)
    if a.head:
        for p in net.parameters():
            p.requires_grad_(False)
        head = net.fc if hasattr(net, "fc") else net[-1]
        for p in head.parameters():
            p.requires_grad_(True)
        net.eval()
        params = list(head.parameters())
    else:
        net.train()
        params = list(net.parameters())
    cap = a.mode == "graph"
    if a.amp and cap:
        sys.exit("--amp runs eager only (GradScaler is not capturable)")
    amp_dt = {"f16": torch.float16, "bf16": torch.bfloat16, "": None}[a.amp]
    scaler = torch.amp.GradScaler("cuda") if amp_dt == torch.float16 else None
    if a.optim == "adam":
        opt = torch.optim.Adam(params, lr=2e-3, capturable=cap)
    else:
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    hx = torch.empty(shape).uniform_(-1, 1).pin_memory()
    hy = torch.randint(0, classes, (a.batch,)).pin_memory()
    sx = torch.empty(shape, device=dev)
    sy = torch.empty((a.batch,), dtype=torch.int64, device=dev)

    def step():
        opt.zero_grad(set_to_none=not cap)
        if amp_dt is None:
            loss = lossf(net(sx), sy)
            loss.backward()
            opt.step()
            return loss
        with torch.autocast("cuda", dtype=amp_dt):
            loss = lossf(net(sx), sy)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    graph = None
    if cap:
        sx.copy_(hx)
        sy.copy_(hy)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(graph):
            static_loss = step()
    times, first, last = [], None, None
    for i in range(a.warmup + a.steps):
        hx.uniform_(-1, 1)
        hy.random_(0, classes)  # fresh labels each step, as train_gpu.c (outside the timed region)
        t0 = time.perf_counter()
        sx.copy_(hx, non_blocking=True)
        sy.copy_(hy, non_blocking=True)
        if graph is not None:
            graph.replay()
            loss = static_loss.item()
        else:
            loss = step().item()
        t1 = time.perf_counter()
        if first is None:
            first = loss
        last = loss
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    times.sort()
    print(json.dumps({"runtime": "pytorch-" + a.mode, "torch": torch.__version__, "model": a.model, "batch": a.batch,
                      "head_only": a.head, "precision": a.amp or "f32", "optim": a.optim, "steps": a.steps, "p50_ms": times[len(times) // 2],
                      "mean_ms": sum(times) / len(times), "min_ms": times[0],
                      "p90_ms": times[(len(times) * 9) // 10],
                      "peak_bytes": torch.cuda.max_memory_allocated(),
                      "peak_reserved_bytes": torch.cuda.max_memory_reserved(), "loss_first": first, "loss_last": last}))


if __name__ == "__main__":
    main()
