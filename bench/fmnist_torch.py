#!/usr/bin/env python3
"""The recipe of `edgert train small-cnn` in PyTorch, for the accuracy peer
(bench/fmnist_accuracy.sh runs both in one go).

Same network (conv3x3 1->16, ReLU, maxpool 2, conv3x3 16->32, ReLU, maxpool 2,
fc 32*7*7->64, ReLU, fc 64->10), same init (weights U(+-sqrt(6/fan_in)),
biases 0), same data handling (pixels /255, standardised with mean 0.286,
std 0.353; the last 10% of the training set held out; per-epoch shuffle;
batches that do not fill up dropped), same optimiser (Adam 2e-3, betas 0.9/
0.999, eps 1e-8, no weight decay, cosine to 0 over all steps, no warm-up),
softmax cross-entropy, batch 32. Prints one JSON line with the test accuracy.

  fmnist_torch.py --data DIR [--epochs 10] [--device cuda|cpu] [--seed 1]
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn


def load_idx(path):
    if not os.path.exists(path):
        path += ".gz"
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        d = f.read()
    nd = d[3]
    dims = [int.from_bytes(d[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(d, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    dev = torch.device(a.device)

    def prep(x):
        return torch.from_numpy(((x.astype(np.float32) / 255.0 - 0.286) / 0.353)[:, None]).to(dev)

    xtr = load_idx(os.path.join(a.data, "train-images-idx3-ubyte"))
    ytr = load_idx(os.path.join(a.data, "train-labels-idx1-ubyte"))
    xte = load_idx(os.path.join(a.data, "t10k-images-idx3-ubyte"))
    yte = load_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte"))
    n_val = int(len(xtr) * 0.1)
    n_train = len(xtr) - n_val
    X, Y = prep(xtr[:n_train]), torch.from_numpy(ytr[:n_train].astype(np.int64)).to(dev)
    XT, YT = prep(xte), torch.from_numpy(yte.astype(np.int64)).to(dev)

    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(32 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10)).to(dev)
    with torch.no_grad():
        for m in net:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                s = math.sqrt(6.0 / fan_in)
                m.weight.uniform_(-s, s)
                m.bias.zero_()
    spe = n_train // a.batch
    total = spe * a.epochs
    opt = torch.optim.Adam(net.parameters(), lr=2e-3, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    lossf = nn.CrossEntropyLoss()
    t0 = time.time()
    for ep in range(a.epochs):
        perm = torch.from_numpy(rng.permutation(n_train)).to(dev)
        net.train()
        for k in range(spe):
            idx = perm[k * a.batch:(k + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(net(X[idx]), Y[idx])
            loss.backward()
            opt.step()
            sched.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.time() - t0
    net.eval()
    with torch.no_grad():
        ok = sum(int((net(XT[i:i + 1000]).argmax(1) == YT[i:i + 1000]).sum()) for i in range(0, len(XT), 1000))
    print(json.dumps({"runtime": "pytorch", "torch": torch.__version__, "device": a.device, "epochs": a.epochs,
                      "batch": a.batch, "train_images": n_train, "steps": total, "seconds": round(secs, 2),
                      "test_accuracy": ok / len(XT)}))


if __name__ == "__main__":
    main()
