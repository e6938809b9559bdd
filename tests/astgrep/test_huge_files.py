"""A 2 GiB file (sparse: no disk is used) is skipped from its size, before a byte of it is read, by the
search, by a rewrite's staging and by the read-back of the matches shown: the answer counts it as too
large and the process's peak memory does not grow by the file."""

from __future__ import annotations

import resource

import tether

HUGE = 2 * 1024**3


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_a_2_gib_file_is_skipped_as_too_large_without_being_read(project):
    (project / "a.py").write_text("print(1)\n")
    with open(project / "huge.py", "wb") as fh:
        fh.write(b"print(2)\n")
        fh.truncate(HUGE)
    before = peak_mib()
    # one worker: the search runs in this process, whose peak memory is measured
    async with tether.open_run(project, options={"astgrep_workers": 1}) as run:
        for path in (".", "huge.py"):
            r = await run.call("ast_grep", {"pattern": "print($A)", "path": path, "language": "python"})
            assert not r.is_error, r.plain
            assert "skipped: 1 too large" in r.plain, r.plain
        r = await run.call("ast_grep", {"pattern": "print($A)", "path": ".", "language": "python"})
        assert "a.py:1:" in r.plain and "huge.py:" not in r.plain.replace("1 too large", ""), r.plain
        r = await run.call(
            "ast_edit", {"pattern": "print($A)", "rewrite": "log($A)", "path": ".", "language": "python"}
        )
        assert not r.is_error, r.plain
        assert "huge.py" not in r.plain, r.plain
    assert peak_mib() - before < 512, f"peak memory grew by {peak_mib() - before:.0f} MiB"
    assert (project / "huge.py").stat().st_size == HUGE
