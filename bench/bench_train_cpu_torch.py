#!/usr/bin/env python3
"""PyTorch CPU peer of `edgert train small-cnn`: the same network (conv3x3
1->16, relu, maxpool2, conv3x3 16->32, relu, maxpool2, fc 1568->64, relu,
fc 64->10), the same data order recipe (Fashion-MNIST, pixels standardised
with 0.286/0.353, last 10% of the limited set held out), Adam + cosine
schedule, batch 32, on N threads. Prints one JSON line like the CLI's
"done" event: images/s over the training steps and the test accuracy.

    bench_train_cpu_torch.py DATA_DIR --limit N --epochs E --threads T
"""
import argparse, gzip, json, math, struct, sys, time

import numpy as np
import torch
import torch.nn as nn


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = struct.unpack(">" + "I" * nd, b[4:4 + 4 * nd])
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--limit", type=int, default=10000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    xs = (idx(f"{a.data}/train-images-idx3-ubyte.gz")[: a.limit].astype(np.float32) / 255 - 0.286) / 0.353
    ys = idx(f"{a.data}/train-labels-idx1-ubyte.gz")[: a.limit].astype(np.int64)
    xt = (idx(f"{a.data}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255 - 0.286) / 0.353
    yt = idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64)
    n_train = a.limit - int(a.limit * 0.1)
    x = torch.from_numpy(xs[:n_train]).unsqueeze(1)
    y = torch.from_numpy(ys[:n_train])
    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(1568, 64), nn.ReLU(), nn.Linear(64, 10))
    spe = n_train // a.batch
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=spe * a.epochs)
    lossf = nn.CrossEntropyLoss()
    steps, t0 = 0, time.perf_counter()
    for ep in range(a.epochs):
        perm = torch.randperm(n_train)
        for s in range(spe):
            i = perm[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(net(x[i]), y[i])
            loss.backward()
            opt.step()
            sched.step()
            steps += 1
    dt = time.perf_counter() - t0
    net.eval()
    with torch.no_grad():
        n = (len(yt) // a.batch) * a.batch
        pred = torch.cat([net(torch.from_numpy(xt[s:s + a.batch]).unsqueeze(1)).argmax(1)
                          for s in range(0, n, a.batch)])
        acc = (pred == torch.from_numpy(yt[:n])).float().mean().item()
    print(json.dumps({"event": "done", "runtime": "pytorch " + torch.__version__, "steps": steps,
                      "seconds": round(dt, 3), "images_per_s": round(steps * a.batch / dt, 1),
                      "test_acc": round(acc, 4), "threads": a.threads}))


if __name__ == "__main__":
    sys.exit(main())
