"""Fixtures shared by every family's tests come from the core's test kit (`tether.testing`, a pytest
plugin: `tether_run`, `no_leftover_processes`); helpers live in tests/support.py."""

from __future__ import annotations

import faulthandler
import os

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis, for every property test of the repository (loaded here, before any test module builds its
# @settings on top of it). On a machine whose cores other test runs share, generating inputs and running
# one example both take many times as long as when idle: the "too_slow" health check and the 200 ms
# deadline would then fail a test for the machine's load, not for the code, so both are off; what each
# test checks (its examples, their sizes) stays as it is. A failure prints the blob that replays it
# (@reproduce_failure). Under CI ($CI set, as .ci/run and CI services do) examples are derandomized and
# the example database is off, so a run is reproducible: a red CI run is red again on the same commit,
# and a rerun cannot turn it green by drawing other inputs. Local runs stay random, so new inputs keep
# being explored there.
settings.register_profile(
    "tether", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("tether-ci", settings.get_profile("tether"), derandomize=True, database=None)
settings.load_profile("tether-ci" if os.environ.get("CI") else "tether")


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the last test, a process that does not end (a thread the interpreter waits for at exit, such
    as a process pool's manager after its worker was reaped elsewhere) is out of reach of both
    pytest-timeout and faulthandler_timeout, which time tests only. Give the exit 300 s: then every
    thread's stack goes to stderr and the process exits non-zero, instead of running into CI's limit."""
    faulthandler.dump_traceback_later(300, exit=True)


@pytest.fixture(params=["bwrap", "landlock"])
def confined(request, tmp_path, monkeypatch):
    """A fake HOME with a fake ~/.ssh/id_ed25519, a loopback listener on the host, a secret variable, a git
    root; once per sandbox backend (``confined.options`` opens a run on it)."""
    from support import Confined

    world = Confined(tmp_path, monkeypatch, request.param)
    yield world
    world.close()


STRESS_LOOPS = (
    4  # busy processes beside a timing-sensitive test: on 2 cores, loads like a busy shared machine's
)


@pytest.fixture
def cpu_stress():
    """STRESS_LOOPS busy processes for the length of the test (each stops on its own after 10 minutes at
    most), for the tests whose real servers, adapters, kernels or workers must answer on a loaded machine:
    diagnostics on write, debug launches and stops, eval cell ends, vibe waits."""
    import subprocess
    import sys

    busy = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", busy]) for _ in range(STRESS_LOOPS)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


# -- astgrep's agreement with the ast-grep CLI, per language (tests/astgrep/test_agreement.py) --------
# (agreed, ladder finds, cases, differences) per language, filled by test_agreement through the fixture. It is
# kept here, not in tests/astgrep, because the summary is printed by the process that reports: under xdist that
# is the controller, which collects no test module; each worker hands its part over when it ends.
AGREEMENT: dict[str, tuple[int, int, int, list[str]]] = {}


@pytest.fixture(scope="session")
def agreement() -> dict[str, tuple[int, int, int, list[str]]]:
    return AGREEMENT


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)  # set in an xdist worker only
    if workeroutput is not None:
        workeroutput["agreement"] = AGREEMENT


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """An xdist worker ended: its part of the agreement table joins the controller's."""
    AGREEMENT.update(getattr(node, "workeroutput", {}).get("agreement", {}))


def pytest_terminal_summary(terminalreporter):
    """The agreement with ast-grep per language (test_agreement), when it ran."""
    if not AGREEMENT:
        return
    terminalreporter.section("agreement with ast-grep")
    terminalreporter.write_line(
        "language    agree/compared       on purpose (ladder readings; rewrites that would not parse, differ in tabs or keep code past the pattern)"
    )
    rows = sorted(AGREEMENT.items(), key=lambda kv: kv[1][0] / max(1, kv[1][2] - kv[1][1]))
    for lang, (a, lf, n, _) in rows:
        terminalreporter.write_line(
            f"{lang:<11} {a:>3}/{n - lf:<3} {100 * a / max(1, n - lf):5.1f}%   {lf:>3} of {n}"
        )
    a, lf, n = (sum(v[i] for v in AGREEMENT.values()) for i in range(3))
    terminalreporter.write_line(
        f"{'all':<11} {a:>3}/{n - lf:<3} {100 * a / max(1, n - lf):5.1f}%   {lf:>3} of {n}"
    )
