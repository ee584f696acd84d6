"""Build llama-cpp-python (the ``llm-server`` extra) so that it runs on any x86-64 machine.

pip compiles llama-cpp-python from source, and llama.cpp's CMake builds it for the
machine at hand by default (``GGML_NATIVE``, ``-march=native``): every instruction set
the CPU advertises goes in, AMX included. On a VM whose CPU advertises AMX but whose
hypervisor has not enabled its state, the server then dies of SIGILL (``tileloadd`` in
``ggml_backend_amx_mul_mat``) on its first completion. ``scripts/setup`` builds it with
the flags this script prints instead, and checks the installed build with it::

    CMAKE_ARGS="$(python scripts/llama_build.py cmake-args)" pip install 'llama-cpp-python'
    python scripts/llama_build.py check     # exit 1 (one line) when the build is not that

The flags: AVX2, FMA, F16C and BMI2 (x86-64-v3, Intel since 2013 and AMD since 2015),
nothing newer (no AVX-512, AVX-VNNI, AMX), on a CPU whose ``/proc/cpuinfo`` lists all
four; on an older CPU (or where it cannot be read), none: SSE2 only, slower but correct.
llama.cpp's runtime dispatch (``GGML_BACKEND_DL`` with ``GGML_CPU_ALL_VARIANTS``) would
pick the best variant at run time, but llama-cpp-python 0.3 installs only the named
``ggml-cpu`` library (not the ``ggml-cpu-<variant>`` ones) and never loads backends from a
folder, so that build does not run from Python.

``check`` reads the build's compiled-in features from ``llama_print_system_info()``
(llama.cpp reports what the compiler targeted, ``__AVX2__``, ``__AMX_INT8__``..., not what
the CPU has), in a child process: a build that cannot even load (SIGILL at import) is a
wrong build too.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

#: The instruction sets of the portable build, as llama.cpp names them in its system info
#: (SSE3 and SSSE3 come with the SSE 4.2 that ``GGML_NATIVE=OFF`` also turns on).
AVX2_FEATURES = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"})
#: Every x86 instruction set llama.cpp's CPU backend reports (ggml-cpu.cpp, get_features).
X86_FEATURES = AVX2_FEATURES | {
    "AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8",
}
#: ``/proc/cpuinfo`` flags the AVX2 build needs (the kernel lists AVX ones only when the
#: OS saves their registers).
AVX2_CPU_FLAGS = frozenset({"avx", "avx2", "fma", "f16c", "bmi2"})

AVX2_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
             "-DGGML_BMI2=ON")
BASELINE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF "
                 "-DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF")

SYSTEM_INFO = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The flags of the first processor in a ``/proc/cpuinfo`` text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def wanted(flags: Iterable[str]) -> tuple[str, frozenset[str]]:
    """(CMAKE_ARGS, the x86 features that build reports) for a CPU with ``flags``."""
    if AVX2_CPU_FLAGS <= set(flags):
        return AVX2_ARGS, AVX2_FEATURES
    return BASELINE_ARGS, frozenset()


def compiled_features(system_info: str) -> frozenset[str]:
    """The features ``llama_print_system_info()`` says are on: "CPU : AVX = 1 | ..."."""
    on = set()
    for part in system_info.replace("\n", "|").split("|"):
        name, eq, value = part.rpartition("=")
        if eq and value.strip() == "1":
            on.add(name.split(":")[-1].strip())
    return frozenset(on)


def problem(system_info: str, expected: frozenset[str]) -> str | None:
    """What is wrong with a build whose system info is ``system_info``, or None."""
    x86 = compiled_features(system_info) & X86_FEATURES
    extra, missing = sorted(x86 - expected), sorted(expected - x86)
    if not extra and not missing:
        return None
    said = []
    if extra:
        said.append(f"compiled with {', '.join(extra)}, which not every x86-64 CPU runs")
    if missing:
        said.append(f"compiled without {', '.join(missing)}")
    return "; ".join(said)


def check(python: str = sys.executable) -> int:
    """Exit status 0 when the installed build is the portable one; else 1, with one line."""
    args, expected = wanted(_this_cpu())
    try:
        done = subprocess.run([python, "-c", SYSTEM_INFO], capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        print("llama-cpp-python: importing it did not finish in 120 s", file=sys.stderr)
        return 1
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        print(f"llama-cpp-python does not load (exit status {done.returncode}): {tail}",
              file=sys.stderr)
        return 1
    info = " ".join(done.stdout.split())
    wrong = problem(info, expected)
    if wrong is not None:
        print(f"llama-cpp-python is not the portable build ({args}): {wrong}",
              file=sys.stderr)
        return 1
    print(f"llama-cpp-python: portable build ({info})")
    return 0


def _this_cpu() -> frozenset[str]:
    try:
        return cpu_flags(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        return frozenset()


def main(argv: list[str]) -> int:
    if argv == ["cmake-args"]:
        print(wanted(_this_cpu())[0])
        return 0
    if argv == ["check"]:
        return check()
    print("usage: llama_build.py cmake-args|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
