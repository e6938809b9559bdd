"""One real call of a family, run by the interpreter of a fresh environment that has only that family.

``python family_alone.py FAMILY ROOT`` opens a run over ROOT (a fresh directory) with the family's
plugin loaded from its entry point, makes one call a user of the family would make, and prints one
JSON line: where the family's module was imported from, and the call's result (``is_error``,
``text``, ``data``). test_packaging runs it in every family's environment.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tether.run import open_run


async def askuser(root: Path) -> tuple[dict[str, Any], list[Any]]:
    from tether_askuser import Answer, Question

    async def human(question: Question) -> Answer:
        return Answer.choose(question.options[0].label)

    options = {"askuser_port": human}
    call = (
        "ask_user",
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
    )
    return options, [call]


async def astgrep(root: Path) -> tuple[dict[str, Any], list[Any]]:
    (root / "app.py").write_text("def area(r):\n    return 3.14 * r * r\n")
    return {}, [("ast_grep", {"pattern": "return $X", "language": "python"})]


async def debug(root: Path) -> tuple[dict[str, Any], list[Any]]:
    (root / "hello.py").write_text("print('hello from the debuggee')\n")
    (root / "pyproject.toml").write_text('[project]\nname = "hello"\nversion = "0"\n')  # a Python project
    return {}, [("debug", {"action": "launch", "program": "hello.py"})]


async def eval(root: Path) -> tuple[dict[str, Any], list[Any]]:  # the family's name
    d = "compute a sum to check the kernel"
    return {}, [
        ("eval", {"code": "sum(range(10))", "description": d}),
        ("eval", {"code": "1 + 1", "description": d, "language": "javascript"}),
    ]


async def lsp(root: Path) -> tuple[dict[str, Any], list[Any]]:
    (root / "app.py").write_text("x: int = 1\n")
    (root / "compile_flags.txt").write_text(
        "-std=c11\n"
    )  # clangd (Debian's): a server the wheel brings none of
    (root / "main.c").write_text("int main(void) {\n    return undefined_name;\n}\n")
    return {}, [("lsp", {"action": "status"}), ("lsp", {"action": "diagnostics", "file": "main.c"})]


async def vibe(root: Path) -> tuple[dict[str, Any], list[Any]]:
    # a worker command that reads its briefing on stdin and answers, as an agent CLI would
    worker = [sys.executable, "-c", "import sys; print('worker read: ' + sys.stdin.read().strip())"]
    return {"vibe_fast": worker}, [("vibe_spawn", {"brief": "say hello", "label": "greeter"})]


async def main(family: str, root: Path) -> None:
    options, calls = await globals()[family](root)
    module = __import__(f"tether_{family}")
    modes = ["vibe"] if family == "vibe" else []
    results = []
    async with open_run(root, options=options, modes=modes, conversation_id="alone") as run:
        for name, arguments in calls:
            r = await run.call(name, arguments)
            results.append({"is_error": r.is_error, "text": r.plain, "data": r.data})
        if family == "vibe":  # the worker's answer comes with vibe_wait
            r = await run.call(
                "vibe_wait", {"worker_id": results[0]["data"]["worker_id"], "timeout_seconds": 60}
            )
            results.append({"is_error": r.is_error, "text": r.plain, "data": r.data})
    print(json.dumps({"module": module.__file__, "results": results}, default=str))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
