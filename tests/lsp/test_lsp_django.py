"""basedpyright on a big real project: Django 5.1.4's sdist (2,788 .py files, no pyright configuration).

In workspace mode basedpyright re-checks the whole program before it publishes (minutes on 2 cores), so
above the run option lsp_open_files_above it checks open files only, and a write checks the files
importing the written one itself. The broken callers it reports are checked against the basedpyright
CLI run over the same files.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tether
import tether.files
from support import edit, introduced
from tether_lsp.hookspecs import tether_lsp_supervisor

FORCE_STR = (
    'def force_str(s, encoding="utf-8", strings_only=False, errors="strict"):',
    'def force_str(s, encoding="utf-8", strings_only=False, errors="strict", *, must):',
)
COMPARE = ("def constant_time_compare(val1, val2):", "def constant_time_compare(val1, val2, *, strict):")
CHECKED = 3  # importers checked per write (the option's default is 5: fewer keep the test short)


def checked_files(run) -> list[str]:
    """The files basedpyright has open (the written ones and the importers a write opened)."""
    (conn,) = run.resource(tether_lsp_supervisor).connections.values()
    return sorted(run.relpath(doc.path) for doc in conn.docs.values())


def cli_errors(root: Path, files: list[str]) -> list[dict]:
    """The basedpyright CLI's errors over ``files`` (its own run: the same version, the same defaults)."""
    cli = Path(sys.executable).parent / "basedpyright"
    done = subprocess.run(
        [str(cli), "--outputjson", *files], cwd=root, capture_output=True, text=True, timeout=600
    )
    return [d for d in json.loads(done.stdout)["generalDiagnostics"] if d["severity"] == "error"]


def naming(errors: list[dict], root: Path, word: str) -> set[tuple[str, int, str]]:
    """(file, line, rule) of the CLI's errors naming the parameter ``word``."""
    return {
        (str(Path(d["file"]).relative_to(root)), d["range"]["start"]["line"] + 1, d.get("rule"))
        for d in errors
        if f'"{word}"' in d["message"]
    }


def broken(r, word: str) -> set[tuple[str, int, str]]:
    return {
        (d["file"], d["line"], d["code"])
        for d in (r.data or {}).get("diagnostics", [])
        if d["severity"] == "error" and f'"{word}"' in d["message"]
    }


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("cpu_stress")
async def test_a_breaking_write_reports_the_broken_importers_the_cli_finds_and_says_what_was_not_checked(
    django_root,
):
    options = {"lsp_importers_checked": CHECKED, "diagnostics_timeout": 150}
    async with tether.open_run(django_root, plugins=[tether.files], options=options) as run:
        r = await edit(run, "django/utils/encoding.py", *FORCE_STR)
        first = broken(r, "must")
        assert {f for f, *_ in first} - {"django/utils/encoding.py"}, r.plain  # callers in other files
        assert "still pending" not in r.plain and "incomplete" not in r.plain, r.plain
        more = re.search(
            r"checked (\d+) file\(s\) importing django/utils/encoding.py; (\d+) more import", r.plain
        )
        assert more is not None, r.plain
        assert int(more[1]) == CHECKED and int(more[2]) > 20, r.plain

        r = await edit(run, "django/utils/crypto.py", *COMPARE)
        second = broken(r, "strict")
        assert {f for f, *_ in second} - {"django/utils/crypto.py"}, r.plain
        assert not broken(r, "must"), r.plain  # reported by the first write already
        assert introduced(r) and all(f != "django/utils/encoding.py" for f, *_ in introduced(r)), r.plain

        # the oracle: the CLI over the same files, on the tree as it is now (both changes in it)
        errors = cli_errors(django_root, checked_files(run))
        assert first == naming(errors, django_root, "must")
        assert second == naming(errors, django_root, "strict")

        r = await edit(run, "django/utils/encoding.py", FORCE_STR[1], FORCE_STR[0])
        # no broken call is left; errors the broken calls had hidden (an operator on force_str's result, which
        # the broken call made Unknown) are back, and the registry reports an error that comes back
        assert not broken(r, "must"), r.plain
        assert "still pending" not in r.plain and "incomplete" not in r.plain, r.plain
