"""``ceg check --engine ray``, with Ray in local mode: the output is the local run's.

Ray runs once for this module on this machine (``ray.init(num_cpus=2)``), and
``ceg check`` (in this process) uses it as it would a cluster. The judges
reach the workers pickled by value (``ray_check_harness``). Ranges are made
small (two batches of 16) so a few hundred responses cross many of them.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun, need_extra
from llm_fakes import Action, FakeOpenAI
from ray_check_harness import BOOM, hashed, mixed_responses, ray_judges, timeless  # noqa: F401
from ray_harness import by_value, no_ray_auth, short_ray_temp

import ceg_cli.check.ray_run
from ceg_cli import Checker
from ceg_cli.check.run import CheckRun, RunSettings
from ceg_cli.check.settings import EngineOptions
from ceg_cli.errors import IndexLoadError, UsageError
from ceg_cli.index.build.ray_pool import INSTALL_HINT

ray: Any = need_extra("ray", "ray")
#: ``--judge hashed``, ``crashing`` and ``killing:MARKER`` (``ray_check_harness``).
pytestmark = pytest.mark.usefixtures("ray_judges")


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    by_value(__name__, "ray_check_harness")
    with no_ray_auth(), short_ray_temp() as temp:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING", object_store_memory=100_000_000, _temp_dir=str(temp))
        yield
        ray.shutdown()


@pytest.fixture(autouse=True)
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ceg_cli.check.ray_run, "RANGE_BATCHES", 2)


@pytest.fixture(scope="module")
def responses(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mixed_responses(tmp_path_factory.mktemp("responses") / "r.jsonl", 300)


def both(run_cli: CliRun, tmp_path: Path, *args: str | Path,
         ray_args: tuple[str, ...] = ("--engine", "ray")) -> tuple[Any, Any]:
    """The same check run locally and on Ray, each writing its files in its own folder."""
    results = []
    for name, extra in (("local", ()), ("ray", ray_args)):
        folder = tmp_path / name
        folder.mkdir()
        results.append(run_cli(
            "check", *args, "--out", folder / "out.jsonl", "--junit", folder / "junit.xml",
            "--summary", folder / "summary.md", "--report", folder / "report.html",
            "--quiet", *extra))
    return results[0], results[1]


def same_files(tmp_path: Path) -> None:
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert (on_ray / "out.jsonl").read_bytes() == (local / "out.jsonl").read_bytes()
    for name in ("junit.xml", "summary.md", "report.html"):
        assert timeless((on_ray / name).read_text()) == timeless((local / name).read_text())


def test_a_ray_check_writes_what_the_local_check_writes(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    local, on_ray = both(run_cli, tmp_path, without(responses), "--index", hash_index,
                         "--judge", "hashed", "--max-nonfactual-rate", "0.9")
    assert on_ray.exit_code == local.exit_code == 2, on_ray.stderr  # bad lines: exit 2
    same_files(tmp_path)
    records = [json.loads(line) for line in (tmp_path / "ray" / "out.jsonl").open()]
    assert len(records) > 290
    assert {r["evidence_source"] for r in records} == {"index", "contexts", None}
    assert any(seg.get("citation_check") for r in records for seg in r["segments"])
    # Each judged record names the judge's own cut for its setting (the workers' judge's).
    assert all(r["judge"]["threshold"] is not None for r in records if r["label"] != "error")
    # The same warnings and summary table, said once each.
    assert timeless(on_ray.stderr) == timeless(local.stderr)


def test_a_ray_check_decides_at_the_local_runs_cut(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    """The driver creates no judge: the cut each record names (here --judge-threshold's,
    else the judge's own per setting) is the workers' judge's, as the local run's."""
    local, on_ray = both(run_cli, tmp_path, without(responses), "--index", hash_index,
                         "--judge", "hashed", "--judge-threshold", "0.6")
    assert on_ray.exit_code == local.exit_code == 2, on_ray.stderr
    same_files(tmp_path)
    assert timeless(on_ray.stderr) == timeless(local.stderr)
    judged = [json.loads(line)["judge"] for line in (tmp_path / "ray" / "out.jsonl").open()]
    assert {(j["threshold"], j["threshold_source"]) for j in judged} == {
        (0.6, "--judge-threshold"), (None, None)}  # None: the bad lines' error records


def without(responses: Path) -> Path:
    from ray_check_harness import without as drop

    return drop(responses, BOOM)


def test_contexts_only_records_need_no_index(
    run_cli: CliRun, responses: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-index"
    local, on_ray = both(run_cli, tmp_path, without(responses), "--index", missing,
                         "--judge", "hashed", "--evidence", "contexts")
    assert on_ray.exit_code == local.exit_code == 2
    same_files(tmp_path)
    assert not missing.exists()


def test_a_resumed_ray_check_finishes_what_a_local_run_began(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    source = without(responses)
    whole = tmp_path / "whole.jsonl"
    run_cli("check", source, "--index", hash_index, "--judge", "hashed", "--out", whole, "-q")
    lines = whole.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:70]) + lines[70][:25])  # torn, as by a kill
    resumed = run_cli("check", source, "--index", hash_index, "--judge", "hashed", "--out",
                      cut, "--resume", "--engine", "ray", "-q")
    assert resumed.exit_code == 2 and "resumed: 70 responses" in resumed.stderr
    assert cut.read_bytes() == whole.read_bytes()


def test_an_error_on_a_worker_stops_the_run_as_it_stops_a_local_one(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    """The judge fails on one batch: the records before that batch are written, then the
    run stops with the local run's line and exit status."""
    local, on_ray = both(run_cli, tmp_path, responses, "--index", hash_index,
                         "--judge", "crashing")
    assert on_ray.exit_code == local.exit_code == 3
    assert on_ray.stderr.strip().splitlines()[-1] == local.stderr.strip().splitlines()[-1] == (
        "internal error: RuntimeError: a bug in the judge (run with --debug for the traceback)")
    written = (tmp_path / "ray" / "out.jsonl").read_bytes()
    assert written == (tmp_path / "local" / "out.jsonl").read_bytes()
    assert 100 < written.count(b"\n") < 200 and BOOM.encode() not in written


def test_a_search_width_the_index_has_not_is_refused_as_locally(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    """``--search-width`` reaches the Ray run's settings (the workers' index too): on the
    flat hash index ``nprobe`` is the local run's one line, exit 2, nothing written."""
    local, on_ray = both(run_cli, tmp_path, without(responses), "--index", hash_index,
                         "--judge", "hashed", "--search-width", "nprobe=4")
    assert on_ray.exit_code == local.exit_code == 2
    assert on_ray.stderr == local.stderr and "is flat, which has no nprobe" in on_ray.stderr
    assert not (tmp_path / "ray" / "out.jsonl").exists()


def test_responses_on_standard_input_reach_the_workers_as_lines(
    hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    """Workers never read the responses file: the driver ships its lines (here from a
    pipe, which no other process could open)."""
    source = without(responses)
    outs = []
    for engine in ("local", "ray"):
        out = tmp_path / f"{engine}.jsonl"
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import ray
            from ray_harness import by_value
            from ray_check_harness import hashed, _hash_model_here
            from ceg_cli import judges
            judges.register("hashed", hashed)
            _hash_model_here()
            by_value("ray_check_harness")
            import ceg_cli.check.ray_run
            ceg_cli.check.ray_run.RANGE_BATCHES = 2
            import shutil
            from ceg_cli.index.build.ray_session import short_temp_dir
            temp = short_temp_dir()
            try:
                if {engine == "ray"}:
                    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                             _temp_dir=str(temp))
                from ceg_cli.cli.main import app
                app(["check", "-", "--index", {str(hash_index)!r}, "--judge", "hashed",
                     "--out", {str(out)!r}, "--engine", {engine!r}, "-q"], prog_name="ceg")
            finally:
                ray.shutdown()
                shutil.rmtree(temp, ignore_errors=True)
        """)
        done = subprocess.run([sys.executable, "-c", script], input=source.read_bytes(),
                              capture_output=True, timeout=300,
                              env={**_environ(), "RAY_AUTH_MODE": "disabled"})
        assert done.returncode == 2, done.stderr.decode()[-3000:]
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0].count(b"\n") > 290


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_an_llm_judge_on_ray_asks_each_prompt_once_within_the_concurrency(
    run_cli: CliRun, tmp_path: Path
) -> None:
    """Workers share the driver's reply cache, and --concurrency holds for the run: 40
    answers, each 6 times over the file, cost 40 calls with 2 workers, never more than
    3 at once; the run on the same cache afterwards, local, costs none and writes the
    same."""
    fake = FakeOpenAI()
    fake.respond = lambda body: Action(delay=0.05, content=json.dumps(
        {"label": "Factual", "supporting_passages": [1], "contradicting_passages": [],
         "reason": "passage 1 says so"}))
    lines = []
    for i in range(240):
        n = (i * 7) % 40  # each of the 40 answers 6 times, far apart
        lines.append(json.dumps({"id": i, "question": f"Where was person {n} born?",
                                 "response": f"Person {n} was born in city {n}.",
                                 "contexts": [f"Person {n} was born in city {n}."]}))
    source = tmp_path / "r.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ("check", source, "--judge", "llm:fake-model", "--llm-base-url", fake.base_url,
              "--cache-dir", tmp_path / "cache", "--concurrency", "3", "--evidence",
              "contexts", "--index", tmp_path / "none")
    try:
        on_ray = run_cli(*common, "--out", tmp_path / "ray.jsonl", "--engine", "ray",
                         "--workers", "2")
        calls, most = fake.chat_calls, fake.max_in_flight
        local = run_cli(*common, "--out", tmp_path / "local.jsonl")
    finally:
        fake.close()
    assert on_ray.exit_code == local.exit_code == 0, on_ray.stderr
    asked = {json.dumps(body["messages"], sort_keys=True) for body in fake.requests}
    assert calls == len(asked) == 40
    assert most <= 3
    assert fake.chat_calls == 40  # the local run found every reply in the cache
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert "LLM calls" in on_ray.stderr and " 40 " in _row(on_ray.stderr, "LLM calls")
    assert " 200 " in _row(on_ray.stderr, "from cache")


def _row(table: str, name: str) -> str:
    return next(line for line in table.splitlines() if line.strip("│ ").startswith(name)) + " "


def test_ray_options_without_ray_are_warned_of_and_bad_counts_are_usage_errors(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    """Without --engine ray its options are read by nothing: warned of, once, and the run
    goes on (a project file's top-level workers may be meant for index build)."""
    out = tmp_path / "out.jsonl"
    result = run_cli("check", without(responses), "--index", hash_index, "--judge", "hashed",
                     "--out", out, "-q", "--ray-address", "127.0.0.1:1", "--workers", "2")
    assert result.exit_code == 2 and out.exists()  # bad lines: exit 2, every record written
    assert result.stderr.count("--workers") == 1 and (
        "warning: --ray-address 127.0.0.1:1, --workers 2: ignored: only --engine ray reads "
        "them (the engine is local)") in result.stderr
    with pytest.warns(UserWarning, match=r"^--gpus-per-worker 1: ignored: only --engine ray"):
        Checker(judge="hashed", gpus_per_worker=1).close()
    zero = run_cli("check", responses, "--index", hash_index, "--engine", "ray",
                   "--workers", "0", "--out", tmp_path / "zero.jsonl")
    assert zero.exit_code == 2 and "--workers" in zero.stderr
    assert "greater than or equal to 1" in zero.stderr
    for options, message in (({"workers": 0}, "--workers 0: use at least 1"),
                             ({"workers": "2"}, "--workers '2': expected an integer, got str"),
                             ({"gpus_per_worker": -1}, "--gpus-per-worker -1: a number of GPUs"),
                             ({"engine": "spark"}, "--engine spark: expected one of local, ray")):
        with pytest.raises(UsageError, match=f"^{re.escape(message)}"):
            RunSettings.resolve(responses=str(responses), index=hash_index,
                                **{"engine": "ray", **options})
    assert not (tmp_path / "zero.jsonl").exists()


def test_an_address_where_no_cluster_listens_is_one_line_in_seconds(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    started = time.monotonic()
    result = run_cli("check", responses, "--index", hash_index, "--engine", "ray",
                     "--ray-address", f"127.0.0.1:{port}", "--out", tmp_path / "out.jsonl")
    assert result.exit_code == 2 and time.monotonic() - started < 10
    assert result.stderr.strip().startswith(
        f"error: --ray-address 127.0.0.1:{port}: nothing answers there")
    assert not (tmp_path / "out.jsonl").exists()


def test_without_ray_installed_the_command_says_how_to_install_it(
    hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.modules["ray"] = None  # import ray fails, as where it is not installed
        from ceg_cli.cli.main import app
        app(["check", {str(responses)!r}, "--index", {str(hash_index)!r}, "--out",
             {str(tmp_path / "out.jsonl")!r}, "--engine", "ray", "-q"], prog_name="ceg")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: --engine ray needs Ray, which is not installed here: {INSTALL_HINT}")
    assert not (tmp_path / "out.jsonl").exists()


def test_workers_999_start_what_the_cluster_has_and_say_so(
    run_cli: CliRun, hash_index: Path, responses: Path, tmp_path: Path
) -> None:
    local, on_ray = both(run_cli, tmp_path, without(responses), "--index", hash_index,
                         "--judge", "hashed",
                         ray_args=("--engine", "ray", "--workers", "999"))
    assert "warning: --workers 999: the Ray cluster has 2 CPUs; starting 2 workers" in (
        on_ray.stderr)
    same_files(tmp_path)


def _ray_run(settings: RunSettings, **kwargs: Any) -> CheckRun:
    return CheckRun(settings, on_bad_line=lambda _m: None, **kwargs)


def test_workers_get_torch_threads_as_their_cpus(
    torched: None, hash_index: Path, responses: Path
) -> None:
    """By default a checker model's worker asks for 2 CPUs, the offline judge's for 1;
    torch in each worker runs that many threads."""
    for judge, workers, threads in (("hashed", None, [1, 1]), ("torched", None, [2]),
                                    ("torched", 2, [1, 1])):
        settings = RunSettings.resolve(responses=str(responses), index=hash_index,
                                       judge=judge, engine="ray", workers=workers)
        run = _ray_run(settings)
        try:
            found = [w["threads"] for w in run._ray.workers]
        finally:
            run.close()
        expected = threads if judge == "torched" else [None] * len(threads)
        assert found == expected, (judge, workers)


@pytest.fixture
def torched(monkeypatch: pytest.MonkeyPatch) -> None:
    from ceg_cli import judges

    monkeypatch.setattr(judges, "_REGISTRY", dict(judges._REGISTRY))
    judges.register("torched", torched_judge)
    monkeypatch.setattr(judges, "_MODEL_JUDGES", judges._MODEL_JUDGES | {"torched"})


def torched_judge(arg: str, options: Any) -> Any:
    """The offline judge, in a process that imported torch (as a checker model does)."""
    import torch  # noqa: F401

    return hashed(arg, options)


def test_a_worker_with_another_index_refuses_naming_its_node(
    hash_index: Path, responses: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.check.ray_run, "meta_digest", lambda index: "0" * 64)
    settings = RunSettings.resolve(responses=str(responses), index=hash_index,
                                   judge="hashed", engine="ray", workers=1)
    with pytest.raises(IndexLoadError) as caught:
        _ray_run(settings)
    node = ray.get_runtime_context().get_node_id()[:8]
    assert str(caught.value) == (
        f"{hash_index}: the index on the Ray worker node {socket.gethostname()} "
        f"({ray.util.get_node_ip_address()}, Ray node {node}) is not the driver's (its "
        "meta.json differs); every node must read the same index at the same path (a "
        "shared folder, or the same copy on each)")


class Counters:
    def __init__(self) -> None:
        self.updates: dict[str, list[int]] = {}
        self.totals: dict[str, int | None] = {}

    def counter(self, label: str, unit: str, total: int | None = None) -> Any:
        self.totals[label] = total
        updates = self.updates.setdefault(label, [])

        class Counter:
            def update(self, n: int = 1) -> None:
                updates.append(n)

        return Counter()


def test_the_driver_shows_the_workers_alive(
    hash_index: Path, responses: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceg_cli.check.ray_run, "PROGRESS_EVERY_S", 0.3)
    settings = RunSettings.resolve(responses=str(without(responses)), index=hash_index,
                                   judge="hashed", engine="ray", workers=2)
    run = _ray_run(settings)
    progress = Counters()
    try:
        run.execute(progress=progress)
    finally:
        run.close()
    assert progress.totals == {"Ray workers alive": 2}
    alive = progress.updates["Ray workers alive"]
    assert alive[0] == 2 and len(alive) > 1  # the workers started, then asked again
    assert max(sum(alive[:n]) for n in range(1, len(alive) + 1)) == 2


def test_the_default_workers_are_the_cpus_over_what_a_judge_needs() -> None:
    from ceg_cli.check.ray_run import _placements

    class Cluster:
        @staticmethod
        def nodes() -> list[dict[str, Any]]:
            return [{"Alive": alive, "Resources": resources} for alive, resources in (
                (True, {"CPU": 0.0}), (True, {"CPU": 4.0}), (False, {"CPU": 8.0}),
                (True, {"CPU": 16.0, "GPU": 4.0}))]

    resources = {"CPU": 20.0, "GPU": 4.0}
    said: list[str] = []

    def places(judge: str, **engine: Any) -> list[tuple[float, float]]:
        settings = replace(RunSettings.resolve(
            responses="-", index=Path("index"), judge=judge, judge_options={"concurrency": 6},
        ), engine=EngineOptions("ray", None, engine.get("workers"), engine.get("gpus", 0.0)))
        found, _threads = _placements(Cluster, settings, resources, said.append)
        return [(p["num_cpus"], p["num_gpus"]) for p in found]

    assert places("offline") == [(1.0, 0.0)] * 20
    assert places("minicheck:roberta") == [(2.0, 0.0)] * 10
    assert places("llm:m") == [(1.0, 0.0)] * 6  # no more than --concurrency
    assert places("minicheck:roberta", gpus=0.5) == [(2.5, 0.5)] * 8
    assert places("offline", workers=8) == [(2.5, 0.0)] * 8
    assert places("offline", workers=999) == [(1.0, 0.0)] * 20
    assert places("minicheck:roberta", gpus=1.0, workers=6) == [(5.0, 1.0)] * 4
    assert said == [
        "--workers 999: the Ray cluster has 20 CPUs; starting 20 workers",
        "--workers 6: the Ray cluster has 4 GPUs, 1 per worker; starting 4 workers"]
    with pytest.raises(UsageError, match=r"^--gpus-per-worker 5: the Ray cluster has 4 GPUs"):
        places("offline", gpus=5.0)


def test_importing_the_check_and_the_cli_leaves_ray_out() -> None:
    code = ("import sys, ceg_cli.cli.main, ceg_cli.check.run, ceg_cli.check.ray_run; "
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_a_checker_on_ray_gives_the_local_checkers_results(
    hash_index: Path, responses: Path
) -> None:
    """``Checker(engine="ray")``: its workers load the judge and the index, and
    ``check_many`` streams what the local Checker's does."""
    records = []
    for line in without(responses).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    results = {}
    for engine in ("local", "ray"):
        with Checker(hash_index, judge="hashed", engine=engine) as checker:
            assert (checker.judge, checker.index) == ("offline", hash_index)
            results[engine] = [r.to_dict() for r in checker.check_many(records)]
            one = checker.check("Aristotle was born in 384 BC.").to_dict()
        results[engine].append(one)
    assert results["ray"] == results["local"] and len(results["ray"]) > 280
