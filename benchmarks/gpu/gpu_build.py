"""The real ``ceg index build`` on whatever device is here, beside the model's raw rate.

    .venv/bin/python benchmarks/gpu/gpu_build.py [--passages 300000] [--device auto]
        [--no-sample] [--workdir DIR]

What issue 25 asks to be measured on a GPU machine (and what this machine's
CPU gives, for comparison):

1. **A generated corpus** of ``--passages`` passages (``million_build``'s
   generator: ~300-word documents of sentences drawn from the sample dump's
   articles, JSONL), built by ``ceg index build --device D`` in its own
   process: wall time and passages/s, CPU use (user and system seconds over
   wall seconds, from ``getrusage`` of the child), peak memory (``VmHWM``
   sampled every 0.2 s), and, on CUDA where ``nvidia-smi`` answers, the share
   of samples in which the GPU was busy (its mean ``utilization.gpu``).
   With ``--workers 1 8`` it is built once per reader setting (``--workers``
   of ``ceg index build``: 1 is the reading thread, N > 1 reader processes).
2. **The model alone, same device, same run**: the built index's passages
   (as embedded: "Title. text") through the same model's ``embed`` in one
   call, in its own process: passages/s. The build's rate over this one is the
   share of the model's speed the pipeline around it delivers. Beside it, in
   the same process and alternated with it (``--repeats``, medians): the same
   passages tokenized alone (``pretokenized.tokenize``, what reader processes
   do with ``--workers N``) and the model alone on those ids
   (``embed_tokens``).
3. **The sample dump** (``sample_data/enwiki-sample.xml.bz2``), built the
   same way, unless ``--no-sample``.

``--model DIR`` builds and encodes with another embedding model (gpu_all.py's
stand-in where the default model's weights are not installed); ``--language``
names the documents' language (no detection, so py3langid is not needed).

Writes ``results/gpu_build.json`` (``--results NAME`` for another name: a bare
name, nothing outside ``results/``), with the device, torch version and core
count. Works in a temporary folder removed at the end (however the script
ends); ``--workdir DIR`` (new, empty, or one an earlier run made) keeps the
generated corpus there for the next run, named by its size, and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    ENWIKI_SAMPLE,
    check_workdir,
    command_line,
    environment,
    log,
    markdown_table,
    results_name,
    stop_child,
    usage_error,
    watch,
    with_parent,
    work_dir,
    write_results,
)
from million_build import make_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: ``ceg`` beside this Python (a virtual environment's), else the package run by this Python
#: (a machine where ceg's dependencies were unpacked onto PYTHONPATH, as gpu_all.py does).
_CEG_SCRIPT = Path(sys.executable).with_name("ceg")
CEG = ([str(_CEG_SCRIPT)] if _CEG_SCRIPT.exists()
       else [sys.executable, "-c", "from ceg_cli.cli.main import run; run()"])

ENCODE_CHILD = r"""
import json, sqlite3, statistics, sys, time
from ceg_cli.index.dense.embedding import load_embedder
from ceg_cli.index.dense.pretokenized import tokenize
index, device, limit, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model = sys.argv[5] or None
db = sqlite3.connect(f"file:{index}/chunks.sqlite?mode=ro", uri=True)
texts = [f"{t}. {x}" if t else x for t, x in db.execute(
    "SELECT title, text FROM chunks ORDER BY id LIMIT ?", (limit,))]
embedder = load_embedder(model, device=device, batch_size=512)
state = embedder.tokenizer_state()
embedder.embed(texts[:512])  # warm-up: first calls pay for kernels and allocation
embedder.embed_tokens(tokenize(state, texts[:512]))
times = {"encode": [], "tokenize": [], "forward": []}
for _ in range(repeats):  # alternated, so that a noisy neighbour hits both alike
    t0 = time.perf_counter()
    embedder.embed(texts)
    t1 = time.perf_counter()
    ids = tokenize(state, texts)
    t2 = time.perf_counter()
    embedder.embed_tokens(ids)
    t3 = time.perf_counter()
    for name, seconds in (("encode", t1 - t0), ("tokenize", t2 - t1), ("forward", t3 - t2)):
        times[name].append(seconds)
median = {name: statistics.median(values) for name, values in times.items()}
print(json.dumps({"passages": len(texts), "seconds": median["encode"], "repeats": repeats,
                  "tokenize_seconds": median["tokenize"], "forward_seconds": median["forward"],
                  "device": embedder.device}))
"""


class GpuSampler:
    """``nvidia-smi``'s GPU utilisation every half second, while a build runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.available = shutil.which("nvidia-smi") is not None

    def __enter__(self) -> GpuSampler:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.available:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=5, check=True,
                ).stdout.split()
                self.samples.append(float(out[0]))
            except (OSError, subprocess.SubprocessError, ValueError, IndexError):
                return

    def summary(self) -> dict[str, Any] | None:
        if not self.samples:
            return None
        busy = sum(1 for s in self.samples if s > 0) / len(self.samples)
        return {"samples": len(self.samples), "busy_share": round(busy, 3),
                "mean_utilization": round(sum(self.samples) / len(self.samples), 1)}


def build(source: Path, index: Path, device: str, workers: int = 1,
          extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``ceg index build SOURCE`` into ``index`` (a new, empty folder) in its own process:
    rate, CPU use, peak memory, GPU use."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with GpuSampler() as gpu:
        readers = ["--workers", str(workers)] if workers > 1 else []
        proc = subprocess.Popen(with_parent([*CEG, "index", "build", str(source), "--index",
                                             str(index), "--device", device, *readers,
                                             *extra, "--quiet"]), cwd=REPO)
        try:
            code, peak_kib, _anon = watch(proc)
        finally:
            stop_child(proc)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"ceg index build {source} exited {code}")
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    passages = int(meta["counts"]["chunks"])
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {
        "source": str(source),
        "reader_processes": workers,
        "passages": passages,
        "seconds": round(wall, 1),
        "passages_per_s": round(passages / wall, 1),
        "cpu_user_s": round(user, 1),
        "cpu_system_s": round(system, 1),
        "cpu_use": round((user + system) / wall, 2),
        "peak_rss_mib": round(peak_kib / 1024),
        "gpu": gpu.summary(),
        "index_type": meta["faiss"].get("index_type", "flat"),
    }


def encode_alone(index: Path, device: str, limit: int, repeats: int,
                 model: str | None = None) -> dict[str, Any]:
    out = subprocess.run(with_parent([sys.executable, "-c", ENCODE_CHILD, str(index), device,
                                      str(limit), str(repeats), model or ""]),
                         capture_output=True, text=True, check=True, cwd=REPO)
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    raw["passages_per_s"] = round(raw["passages"] / raw["seconds"], 1)
    raw["tokenize_per_s"] = round(raw["passages"] / raw["tokenize_seconds"], 1)
    raw["forward_per_s"] = round(raw["passages"] / raw["forward_seconds"], 1)
    for key in ("seconds", "tokenize_seconds", "forward_seconds"):
        raw[key] = round(raw[key], 2)
    return raw


def measure_all(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The builds (and the model alone) in ``work``; each index folder is removed after."""
    # Named by its size, written whole then renamed: a corpus of another size, or one
    # a killed run left half-written, is never taken for this one.
    docs = work / f"docs-{args.passages}.jsonl"
    if not docs.exists():
        log(f"writing a corpus of about {args.passages:,} passages to {docs}")
        part = work / f".{docs.name}.{os.getpid()}.tmp"
        try:
            make_corpus(part, args.passages, seed=0)
            os.replace(part, docs)
        finally:
            part.unlink(missing_ok=True)
    runs: dict[str, Any] = {}
    alone: dict[str, Any] | None = None
    extra = tuple(["--model", args.model] if args.model else []) + tuple(
        ["--language", args.language] if args.language else [])
    for workers in args.workers:
        name = "generated" if workers == 1 else f"generated, {workers} readers"
        log(f"building the generated corpus ({name})")
        # A fresh folder per build, removed once measured: nothing else of this run stays.
        index = Path(tempfile.mkdtemp(prefix="index-generated-", dir=work))
        try:
            runs[name] = build(docs, index, args.device, workers, extra)
            if alone is None:
                log("the model alone on the same passages")
                alone = encode_alone(index, args.device, args.encode_limit, args.repeats,
                                     args.model)
        finally:
            shutil.rmtree(index, ignore_errors=True)
        runs[name]["model_alone"] = alone
    if not args.no_sample:
        log("building the sample dump")
        index = Path(tempfile.mkdtemp(prefix="index-sample-", dir=work))
        try:
            runs["sample"] = build(ENWIKI_SAMPLE, index, args.device, 1, extra)
        finally:
            shutil.rmtree(index, ignore_errors=True)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=300_000)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--no-sample", action="store_true", help="skip the sample dump")
    ap.add_argument("--encode-limit", type=int, default=100_000,
                    help="passages for the model-alone rate, at most")
    ap.add_argument("--repeats", type=int, default=3,
                    help="times the model-alone rates are measured (medians reported)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--model", default=None,
                    help="embedding model (a folder): ceg index build --model; default ceg's")
    ap.add_argument("--language", default=None,
                    help="ceg index build --language (no detection: py3langid not needed)")
    ap.add_argument("--results", default="gpu_build")
    ap.add_argument("--workers", type=int, nargs="+", default=[1],
                    help="reader settings to build the generated corpus with (1: a thread; "
                    "N > 1: N reader processes), each its own run")
    args = ap.parse_args()
    # Before any work: where the results and the work go.
    results_name(args.results)
    check_workdir(args.workdir)
    if args.passages < 1 or any(w < 1 for w in args.workers):
        usage_error("--passages and --workers: must be at least 1")
    import torch

    with work_dir(args.workdir, prefix="ceg-gpu-build-") as work:
        runs = measure_all(args, work)
    for run in runs.values():
        alone = run.get("model_alone")
        if alone:
            run["build_over_model"] = round(run["passages_per_s"] / alone["passages_per_s"], 3)
    report = {
        "command": command_line(),
        "environment": environment(),
        "device": args.device,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "model": args.model or "default",
        "cores": os.cpu_count(),
        "runs": runs,
    }
    write_results(args.results, report)
    rows = [[name, f"{r['passages']:,}", f"{r['seconds']:.0f}", f"{r['passages_per_s']:,.0f}",
             f"{r['model_alone']['passages_per_s']:,.0f}" if "model_alone" in r else "",
             f"{r['model_alone']['forward_per_s']:,.0f}" if "model_alone" in r else "",
             f"{r['model_alone']['tokenize_per_s']:,.0f}" if "model_alone" in r else "",
             f"{r['cpu_use'] * 100:.0f} %", f"{r['peak_rss_mib']:,}",
             f"{r['gpu']['busy_share'] * 100:.0f} %" if r["gpu"] else "n/a"]
            for name, r in runs.items()]
    print(f"device {report['cuda'] or 'cpu'}, torch {report['torch']}, {report['cores']} cores\n")
    print(markdown_table(["corpus", "passages", "s", "build passages/s", "encode alone /s",
                          "forward on ids /s", "tokenize /s",
                          "CPU use", "peak MiB", "GPU busy"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
