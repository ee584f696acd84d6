"""``scripts/llama_build.py``: the llm-server build that runs on any x86-64 machine.

Issue 44, item 1: pip built llama-cpp-python for the CPU at hand (``GGML_NATIVE``), AMX
included, and on an Intel Xeon VM whose hypervisor had not enabled AMX the server died
of SIGILL on its first completion. ``scripts/setup`` builds it with the flags this script
gives and reads the installed build's instruction sets back with it, building again when
they are not those. The system-info lines below are what llama-cpp-python 0.3.36 printed
on this project's machine (an Intel Xeon with AMX): built natively, and built portably.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "llama_build.py"

NATIVE = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | "
          "FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | "
          "AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
PORTABLE = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
            "BMI2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
XEON_FLAGS = ("flags\t\t: fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c bmi1 avx2 "
              "bmi2 avx512f avx512_vnni avx_vnni amx_bf16 amx_tile amx_int8\n")


@pytest.fixture(scope="module")
def llama_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llama_build", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_avx2_cpu_gets_the_avx2_build_and_nothing_newer(llama_build: ModuleType) -> None:
    flags = llama_build.cpu_flags("processor\t: 0\n" + XEON_FLAGS)
    assert {"amx_int8", "avx2"} <= flags
    args, features = llama_build.wanted(flags)
    assert args.split() == ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON",
                            "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON"]
    assert features == {"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"}


def test_an_older_cpu_or_no_cpuinfo_gets_the_sse2_build(llama_build: ModuleType) -> None:
    old = llama_build.cpu_flags("flags : fpu sse sse2 ssse3 sse4_1 sse4_2 avx\n")
    for flags in (old, frozenset()):
        args, features = llama_build.wanted(flags)
        assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AVX2=OFF" in args
        assert "-DGGML_SSE42=OFF" in args and features == frozenset()


def test_the_native_build_is_refused_naming_what_it_holds(llama_build: ModuleType) -> None:
    _, features = llama_build.wanted(llama_build.cpu_flags(XEON_FLAGS))
    assert llama_build.problem(NATIVE, features) == (
        "compiled with AMX_INT8, AVX512, AVX512_BF16, AVX512_VBMI, AVX512_VNNI, AVX_VNNI, "
        "which not every x86-64 CPU runs"
    )
    assert llama_build.problem(PORTABLE, features) is None
    # A build for SSE2 where AVX2 was asked for is not the build either.
    assert llama_build.problem("CPU : LLAMAFILE = 1 | ", features).startswith(
        "compiled without AVX, AVX2, BMI2")


def fake_python(tmp_path: Path, body: str) -> str:
    """An executable that stands for the venv's python: ``sh`` running ``body``."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        (f"echo '{PORTABLE}'", 0, "llama-cpp-python: portable build (CPU : SSE3 = 1 |"),
        (f"echo '{NATIVE}'", 1, "llama-cpp-python is not the portable build (-DGGML_NATIVE=OFF"),
        # A build that cannot even load here: what the old build did on some CPUs.
        ("echo 'loading' >&2; kill -ILL $$", 1, "llama-cpp-python does not load (exit "
         "status -4): loading"),
    ],
)
def test_check_reads_the_installed_build_in_a_child(
    llama_build: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], body: str, status: int, said: str,
) -> None:
    monkeypatch.setattr(llama_build, "_this_cpu", lambda: llama_build.cpu_flags(XEON_FLAGS))
    assert llama_build.check(fake_python(tmp_path, body)) == status
    out = capsys.readouterr()
    line = out.out if status == 0 else out.err
    assert line.startswith(said) and line.count("\n") == 1


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the flags are x86-64's")
def test_cmake_args_prints_one_line_of_cmake_definitions(
    llama_build: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert llama_build.main(["cmake-args"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("-DGGML_NATIVE=OFF ") and "AMX" not in line
