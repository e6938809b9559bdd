"""Timeouts, kernel death, reset and clean shutdown: each test owns its run and its kernel."""

from __future__ import annotations

import psutil
import tether
import tether_eval.plugin as eval_plugin
from tether_eval.hookspecs import tether_eval_kernels

D = "exercise a kernel fault for tests"


def open_run(root, fake_tools, **options):
    return tether.open_run(root, plugins=[eval_plugin, fake_tools], load_entry_points=False, options=options)


async def cell(run, code, **kw):
    return await run.call("eval", {"code": code, "description": D, **kw})


async def test_silent_sleep_is_interrupted_and_state_survives(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools, eval_timeout=1.0, eval_interrupt_grace=5.0) as run:
        await cell(run, "kept = 'still here'")
        r = await cell(run, "import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('nev' + 'er')")
        assert r.is_error and r.data["status"] == "interrupted"
        assert "started" in r.plain and "never" not in r.plain
        assert "was interrupted" in r.plain and "state survive" in r.plain
        r = await cell(run, "kept")
        assert "'still here'" in r.plain and r.data["kernel"]["started"] is False


async def test_printing_cell_is_not_interrupted(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools, eval_timeout=1.0) as run:
        r = await cell(
            run,
            "import time\nfor i in range(8):\n    print('tick', i, flush=True)\n    time.sleep(0.4)\n'done'",
        )
        assert not r.is_error, r.plain
        assert "tick 7" in r.plain and "'done'" in r.plain and r.data["status"] == "ok"


async def test_slow_bridge_call_suspends_the_budget(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools, eval_timeout=1.0) as run:
        r = await cell(run, "tool('slow', {'seconds': 2.5})")
        assert not r.is_error, r.plain
        assert "slept 2.5" in r.plain and r.data["tool_calls"] == 1


async def test_cell_ignoring_interrupt_restarts_kernel_and_says_state_lost(
    tmp_path, fake_tools, no_leftover_processes
):
    async with open_run(tmp_path, fake_tools, eval_timeout=1.5, eval_interrupt_grace=1.0) as run:
        first = await cell(
            run,
            "lost = 1\nimport signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ignoring', flush=True)\ntime.sleep(60)",
        )
        assert first.is_error and first.data["status"] == "stuck"
        assert (
            "ignoring" in first.plain
            and "did not stop when interrupted" in first.plain
            and "was lost" in first.plain
        )
        old_pid = first.data["kernel"]["pid"]
        assert not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == psutil.STATUS_ZOMBIE
        r = await cell(run, "'lost' in globals()")
        assert "False" in r.plain and r.data["kernel"]["started"] is True


async def test_kernel_death_is_reported_and_next_call_starts_fresh(
    tmp_path, fake_tools, no_leftover_processes
):
    async with open_run(tmp_path, fake_tools) as run:
        await cell(run, "doomed = 1")
        r = await cell(run, "import os\nprint('bye', flush=True)\nos._exit(1)")
        assert r.is_error and r.data["status"] == "died"
        assert (
            "kernel died" in r.plain
            and "state is lost" in r.plain
            and "next call starts a fresh kernel" in r.plain
        )
        r = await cell(run, "'doomed' in globals()")
        assert not r.is_error and "False" in r.plain and r.data["kernel"]["started"] is True


async def test_kernel_killed_from_outside_between_cells(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools) as run:
        r = await cell(run, "x = 1")
        victim = psutil.Process(r.data["kernel"]["pid"])
        victim.kill()  # e.g. the OOM killer, some time before the next call
        psutil.wait_procs([victim], timeout=5)
        r = await cell(run, "'x' in globals()")
        assert not r.is_error and "False" in r.plain and r.data["kernel"]["started"] is True
        assert "previous python kernel died since the last cell" in r.plain


async def test_reset_starts_clean(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools) as run:
        r = await cell(run, "gone = 5")
        pid = r.data["kernel"]["pid"]
        r = await cell(run, "'gone' in globals()", reset=True)
        assert "interpreter reset" in r.plain and "False" in r.plain
        assert r.data["kernel"]["pid"] != pid and r.data["kernel"]["started"] is True
        r = await cell(run, "", reset=True)  # reset only
        assert not r.is_error and "interpreter reset" in r.plain and r.data["status"] == "reset"


async def test_close_leaves_no_process_and_no_files(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools) as run:
        r = await cell(run, "import subprocess\np = subprocess.Popen(['sleep', '300'])\np.pid")
        child = int(r.plain.split()[-1])
        r = await cell(run, "1", language="javascript")
        assert not r.is_error, r.plain
        private = run.resource(tether_eval_kernels)._dir
        assert private.exists()
    assert not private.exists()
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written into the root


async def test_two_runs_never_share_a_kernel(tmp_path, fake_tools, no_leftover_processes):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with open_run(tmp_path / "a", fake_tools) as one, open_run(tmp_path / "b", fake_tools) as two:
        await cell(one, "mine = 'one'")
        r = await cell(two, "'mine' in globals()")
        assert "False" in r.plain
        r1 = await cell(one, "import os\nos.getpid()")
        assert r1.data["kernel"]["pid"] != r.data["kernel"]["pid"]


async def test_javascript_busy_loop_is_interrupted_and_state_survives(
    tmp_path, fake_tools, no_leftover_processes
):
    async with open_run(tmp_path, fake_tools, eval_timeout=1.0, eval_interrupt_grace=3.0) as run:
        await cell(run, "var kept = 'js state';", language="javascript")
        r = await cell(
            run, "const t0 = Date.now(); while (Date.now() - t0 < 60000) {}", language="javascript"
        )
        assert r.is_error and r.data["status"] == "interrupted" and "state survive" in r.plain
        r = await cell(run, "kept", language="javascript")
        assert "js state" in r.plain and r.data["kernel"]["started"] is False


async def test_javascript_exit_is_death_and_next_call_recovers(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools) as run:
        await cell(run, "var gone = 1;", language="javascript")
        r = await cell(run, "Deno.exit(3)", language="javascript")
        assert r.is_error and r.data["status"] == "died" and "kernel died" in r.plain
        r = await cell(run, "typeof gone", language="javascript")
        assert not r.is_error and "undefined" in r.plain and r.data["kernel"]["started"] is True


async def test_cancelled_call_interrupts_the_cell(tmp_path, fake_tools, no_leftover_processes):
    import asyncio

    async with open_run(tmp_path, fake_tools) as run:
        await cell(run, "state = 'kept'")
        call = asyncio.create_task(cell(run, "import time\ntime.sleep(60)"))
        await asyncio.sleep(1.0)
        call.cancel()
        with __import__("pytest").raises(asyncio.CancelledError):
            await call
        r = await asyncio.wait_for(cell(run, "state"), 10)  # not queued behind a 60 s sleep
        assert "'kept'" in r.plain


# -- budgets: inactivity counts only output that changes something, and a cell has a total budget ---


async def test_cell_that_prints_forever_stops_at_its_total_budget(
    tmp_path, fake_tools, no_leftover_processes
):
    import asyncio

    async with open_run(tmp_path, fake_tools, eval_timeout=2.0, eval_total_timeout=3.0) as run:
        await cell(run, "kept = 'after the flood'")
        code = "import time\nn = 0\nwhile True:\n    n += 1\n    print('tick', n, flush=True)\n    time.sleep(0.02)"
        r = await asyncio.wait_for(cell(run, code), 60)  # a failure is a failure, not a hang
        assert r.is_error and r.data["status"] == "interrupted", r.plain
        assert "ran for its total budget of 3 s (run option eval_total_timeout)" in r.plain
        assert "tick 1\n" in r.plain and "state survive" in r.plain
        r = await cell(run, "kept")
        assert "'after the flood'" in r.plain and r.data["kernel"]["started"] is False


async def test_total_budget_does_not_count_open_tool_calls(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools, eval_total_timeout=1.5) as run:
        r = await cell(run, "tool('slow', {'seconds': 1.0})\ntool('slow', {'seconds': 1.0})\n'both'")
        assert not r.is_error and "'both'" in r.plain, r.plain


async def test_clear_output_flood_is_inactivity_and_is_not_kept(tmp_path, fake_tools, no_leftover_processes):
    import asyncio

    async with open_run(tmp_path, fake_tools, eval_timeout=1.5) as run:
        code = "from IPython.display import clear_output\nprint('bef' + 'ore', flush=True)\nwhile True:\n    clear_output()"
        r = await asyncio.wait_for(cell(run, code), 60)
        assert r.is_error and r.data["status"] == "interrupted", r.plain
        assert "showed no output for 1.5 s (run option eval_timeout)" in r.plain
        assert "before" not in r.plain  # cleared, as a notebook shows it


async def test_redrawn_output_keeps_the_last_frame(tmp_path, fake_tools, no_leftover_processes):
    async with open_run(tmp_path, fake_tools) as run:
        await cell(run, "started = True")  # the first cell's banner aside
        # 400 frames are 800 messages: fewer than the kernel's PUB socket queues (1000), so none is dropped
        # however busy the machine (a bigger flood may lose some and says so: see the test below)
        r = await cell(
            run,
            "from IPython.display import clear_output\nfor i in range(400):\n    clear_output(wait=True)\n    print('frame', i)",
        )
        assert not r.is_error and r.plain.strip() == "frame 399", r.plain
        # more redrawn displays than a cell keeps: the last one is still shown
        r = await cell(
            run,
            "from IPython.display import clear_output, display\nfor i in range(120):\n    clear_output(wait=True)\n    display(i)",
        )
        assert r.plain.strip() == "119", r.plain
        # clear_output(wait=True) with nothing after it: the output stays, as in Jupyter
        r = await cell(run, "print('stays')\nclear_output(wait=True)")
        assert r.plain.strip() == "stays", r.plain


def test_output_that_changes_nothing_is_not_kept():
    from tether_eval.cell_end import CellEnd

    end = CellEnd("ok", [])
    empty = {"msg_type": "stream", "content": {"name": "stdout", "text": ""}}
    clear = {"msg_type": "clear_output", "content": {"wait": False}}
    text = {"msg_type": "stream", "content": {"name": "stdout", "text": "x\n"}}
    assert not any(end.add(empty, 1000) for _ in range(150_000))
    assert not any(end.add(clear, 1000) for _ in range(150_000))
    assert end.messages == [] and not end.tail
    assert end.add(text, 1000) and end.add(clear, 1000)  # clearing something is a change
    for _ in range(150_000):
        end.add(text, 1000)
        end.add(clear, 1000)
    end.add(text, 1000)
    end.finish()
    assert end.messages == [text]  # memory bounded by what is shown, not by what was sent


async def test_cell_whose_idle_was_dropped_ends_and_says_output_may_be_missing():
    """ZeroMQ's PUB socket drops messages for a slow reader, the idle among them: a probe tells."""
    import asyncio
    import time
    from pathlib import Path

    from tether_eval.cell import Cell
    from tether_eval.cell_end import CellEnd
    from tether_eval.kernel import Kernel, KernelSpec
    from tether_eval.timing import SETTLE

    queue: asyncio.Queue = asyncio.Queue()
    probe_idle = {
        "msg_type": "status",
        "parent_header": {"msg_id": "probe"},
        "content": {"execution_state": "idle"},
    }

    class Client:  # the kernel answers the probe (a kernel_info): its idle arrives, the cell's never will
        probes = 0

        def kernel_info(self):
            self.probes += 1
            queue.put_nowait(("iopub", probe_idle))
            return "probe"

    spec = KernelSpec("python", ("python",), "ipc", "python", "test", "host")
    kernel = Kernel(
        spec, Path("unused"), Path("unused"), stop=None
    )  # only its message loop runs, on a queue fed here
    kernel.kc = Client()
    out = {
        "msg_type": "stream",
        "parent_header": {"msg_id": "cell"},
        "content": {"name": "stdout", "text": "last words\n"},
    }
    queue.put_nowait(("iopub", out))
    queue.put_nowait(("shell", {"msg_type": "execute_reply", "content": {"status": "ok"}}))
    end = CellEnd("ok", [])
    t0 = time.monotonic()
    await Cell(kernel)._collect(queue, end, 300.0, None, extend=True, total=3600.0)
    end.finish()
    assert end.status == "ok" and end.idle_lost and kernel.kc.probes == 1
    assert SETTLE <= time.monotonic() - t0 < 60
    text = "".join(m["content"]["text"] for m in end.messages)
    assert text.startswith("last words\n") and "output may be missing" in text
