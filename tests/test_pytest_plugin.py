"""ceg's pytest plugin (issue 33 item 2), run as a user runs it: a pytest of its own.

Each run is a subprocess pytest (``pytester.runpytest_subprocess``), which loads the
plugin through the installed ``pytest11`` entry point as a user's pytest does. Most
runs use a bag-of-words embedder (the generated conftest puts it in place of the
model): its similarities follow shared words, so retrieval and the offline judge
behave as with the real model for these sentences, in a fraction of the time; one
test runs the real model.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

BOW = '''
import hashlib, os, re
from pathlib import Path

import numpy as np

import ceg_cli.index.dense.embedding as _embedding
import ceg_cli.index.store as _store


class Bow:
    """Words hashed into 256 dimensions: cosine follows the words two texts share."""

    name = "test/bow"
    dimension = 256

    def embed(self, texts):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\\w+", text.lower()):
                slot = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
                out[row, slot % self.dimension] += 1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else out[row]
        return out
'''

CONFTEST = BOW + '''

_real = _embedding.load_embedder


def _load(name=None, **kwargs):
    return Bow() if name in (None, Bow.name) else _real(name, **kwargs)


_embedding.load_embedder = _store.load_embedder = _load

# Every Checker built in this run (one line per load, with the process id).
import ceg_cli.api as _api

_init = _api.Checker.__init__


def _counted(self, *args, **kwargs):
    with open(Path(__file__).parent / "loads.txt", "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    _init(self, *args, **kwargs)


_api.Checker.__init__ = _counted
'''

EIFFEL_TESTS = '''
from ceg_cli.testing import assert_grounded

EIFFEL = ["The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. "
          "It was completed in 1889 for the World's Fair."]


def test_unsupported_answer(ceg_checker):
    result = ceg_checker.check("The Eiffel Tower is in Paris. It was completed in 1925.",
                               question="When was the Eiffel Tower completed?", contexts=EIFFEL)
    assert_grounded(result)


def test_supported_answer(ceg_checker):
    result = ceg_checker.check("The Eiffel Tower is in Paris. It was completed in 1889.",
                               question="When was the Eiffel Tower completed?", contexts=EIFFEL)
    assert_grounded(result)
'''


def _loads(pytester: pytest.Pytester) -> list[str]:
    path = pytester.path / "loads.txt"
    return path.read_text().split() if path.exists() else []


def _failure_text(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines)


def _assert_flagged(text: str) -> None:
    assert "1 of 2 sentences are not supported by the evidence (allowed: 0):" in text
    assert "- sentence 2 [nonfactual, not_enough_evidence]: 'It was completed in 1925.'" in text
    assert "reason: '1925' not in the evidence" in text
    # The wrong words, as the record's spans give them.
    assert "unsupported: '1925' (date" in text
    # The offline judge reads no similarity: the contexts are ranked by BM25 alone.
    assert "best evidence: context 1, ranked first by BM25 (no similarity computed)" in text
    assert "similarity 0.00" not in text
    assert "It was completed in 1889 for the World's Fair." in text


def test_a_supported_answer_passes_and_an_unsupported_one_fails_naming_its_sentence(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_rag=EIFFEL_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED test_rag.py::test_unsupported_answer*"])
    text = _failure_text(result)
    _assert_flagged(text)
    # pytest shows the test's own line, not assert_grounded's inside ceg.
    assert ">       assert_grounded(result)" in text and "raise AssertionError" not in text
    assert _loads(pytester) == _loads(pytester)[:1]  # one Checker for the session


def test_junit_x_and_k_work_as_with_any_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_rag=EIFFEL_TESTS)
    result = pytester.runpytest_subprocess("--junitxml=junit.xml", timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    failures = {case.get("name"): case.find("failure") for case in root.iter("testcase")}
    assert failures["test_supported_answer"] is None
    failure = failures["test_unsupported_answer"]
    assert failure is not None
    _assert_flagged((failure.get("message") or "") + (failure.text or ""))

    result = pytester.runpytest_subprocess("-x", timeout=300)
    result.assert_outcomes(failed=1)  # stopped at the unsupported answer, the first test
    result = pytester.runpytest_subprocess("-k", "supported and not unsupported", timeout=300)
    result.assert_outcomes(passed=1, deselected=1)


def test_under_xdist_each_worker_loads_the_checker_once(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    many = EIFFEL_TESTS + "".join(
        f"\n\ndef test_supported_{n}(ceg_checker):\n"
        "    assert_grounded(ceg_checker.check('The Eiffel Tower is in Paris.', contexts=EIFFEL))\n"
        for n in range(8)
    )
    pytester.makepyfile(test_rag=many)
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", timeout=300)
    result.assert_outcomes(passed=9, failed=1)
    _assert_flagged(_failure_text(result))
    loads = _loads(pytester)
    # Both workers ran tests, and each built its Checker exactly once.
    assert len(loads) == 2 and len(set(loads)) == 2


INDEX_TESTS = '''
from pathlib import Path

from ceg_cli.testing import assert_grounded


def test_the_index_and_judge_come_from_options_or_ini(ceg_checker, pytestconfig):
    expected = Path(pytestconfig.getoption("--expect-index"))
    assert ceg_checker.index == expected
    assert ceg_checker.judge == "offline"
    assert_grounded(ceg_checker.check("Aristotle was a Greek philosopher."))
'''

EXPECT_OPTION = '''

def pytest_addoption(parser):
    parser.addoption("--expect-index")
'''


@pytest.fixture(scope="module")
def bow_built(tmp_path_factory: pytest.TempPathFactory, mini_wiki: Path) -> Path:
    """The index, built in this process before any test's ``pytester`` exists: a fixture
    of a wider scope is set up first. ``pytester`` restores ``sys.modules`` after its
    test, dropping the modules first imported during it, and an extension module
    (faiss, numpy.fft) imported again in the same process crashes or fails: a build
    inside the test broke every later test that built an index (a segfault in faiss)."""
    from ceg_cli.index.build.builder import BuildOptions, build_index

    space: dict[str, Any] = {}
    exec(BOW, space)  # the same embedder the generated conftest loads by its name
    target = tmp_path_factory.mktemp("bow") / "wiki"
    build_index([mini_wiki], target, BuildOptions(), embedder=space["Bow"]())
    return target


@pytest.fixture
def bow_index(pytester: pytest.Pytester, bow_built: Path) -> Path:
    target = pytester.path / "indexes" / "wiki"
    target.parent.mkdir()
    shutil.copytree(bow_built, target)
    return target


def test_the_index_comes_from_ceg_index_or_the_ini_file(
    pytester: pytest.Pytester, bow_index: Path
) -> None:
    pytester.makeconftest(CONFTEST + EXPECT_OPTION)
    pytester.makepyfile(test_index=INDEX_TESTS)
    result = pytester.runpytest_subprocess(
        f"--ceg-index={bow_index}", "--ceg-judge=offline", f"--expect-index={bow_index}",
        timeout=300,
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"ceg: index {bow_index}, judge offline"])

    # ini keys, the index relative to the ini file; the command line wins over them.
    pytester.makeini("[pytest]\nceg_index = indexes/wiki\nceg_judge = offline\n")
    result = pytester.runpytest_subprocess(f"--expect-index={bow_index}", timeout=300)
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("--ceg-judge=nosuch", f"--expect-index={bow_index}",
                                           timeout=300)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ceg_checker: *nosuch*"])
    assert "Traceback" not in result.stdout.str()


def test_a_bad_option_is_one_message_naming_the_option_the_user_gave(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Said once (not twice, "During handling of the above exception"), with the
    plugin's option or ini key, not the CLI's --judge (issue 44 item 20)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_rag=EIFFEL_TESTS)
    missing = tmp_path / "no-such-index"
    result = pytester.runpytest_subprocess(f"--ceg-index={missing}", timeout=300)
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    assert "During handling" not in out and "Traceback" not in out
    first = next(line for line in result.outlines if "ceg_checker: " in line)
    message = first[first.index("ceg_checker: "):]
    assert message.startswith(f"ceg_checker: no index at {missing}")
    # once for each test whose setup it failed; the short summary repeats it
    # only when pytest does not truncate (CI=true), so count the report lines
    assert sum(line == message for line in result.outlines) == 2, out
    result = pytester.runpytest_subprocess("--ceg-judge=bogus", timeout=300)
    result.stdout.fnmatch_lines(["*ceg_checker: --ceg-judge bogus: unknown judge; choose one*"])
    assert "--judge bogus" not in result.stdout.str()
    pytester.makeini("[pytest]\nceg_judge = minicheck\n")
    result = pytester.runpytest_subprocess(timeout=300)
    result.stdout.fnmatch_lines(["*ceg_checker: ceg_judge (ini) minicheck: say which model*"])


def test_a_failure_carries_no_debug_lines_of_bm25s(pytester: pytest.Pytester) -> None:
    """bm25s sets its own logger to DEBUG; pytest showed its lines under every failure."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_rag=EIFFEL_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "Captured log" not in out and "DEBUG" not in out, out


def test_a_suite_that_does_not_use_ceg_is_unchanged(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess(timeout=300)
    result.assert_outcomes(passed=1)
    assert "ceg:" not in result.stdout.str() and _loads(pytester) == []
    result = pytester.runpytest_subprocess("--help", timeout=300)
    result.stdout.fnmatch_lines(["*--ceg-index=PATH*", "*--ceg-judge=JUDGE*",
                                 "*ceg_index (string)*", "*ceg_judge (string)*"])


@pytest.mark.slow
def test_with_the_real_model_the_unsupported_sentence_is_flagged(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_rag=EIFFEL_TESTS)
    result = pytester.runpytest_subprocess(timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    _assert_flagged(_failure_text(result))
