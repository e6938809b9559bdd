"""The terminal port end to end: `tether call ask_user` on a real pseudo-terminal, a human typing."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from pathlib import Path

TETHER = str(Path(sys.executable).with_name("tether"))

QUESTION = {
    "question": "Which database should the service use?",
    "context": "The migration files depend on it.",
    "options": [
        {"label": "Postgres", "description": "the production default"},
        {"label": "SQLite"},
        {"label": "Redis, as a cache", "description": "labels may hold commas"},
    ],
}


def call(pty_spawn, tmp_path, args: dict, env: dict | None = None, stdin_tty: bool = True):
    return pty_spawn(
        [TETHER, "call", "ask_user", json.dumps(args), "--root", str(tmp_path), "--json"], env, stdin_tty
    )


def result_of(p) -> dict:
    code, out = p.finish()
    result = json.loads(out)
    assert code == (1 if result["is_error"] else 0)
    return result


def test_answer_by_number_on_the_terminal_not_on_stdout(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, QUESTION)
    p.expect(r"Which database should the service use\?")
    p.expect(r"The migration files depend on it\.")
    p.expect(r"1\. Postgres - the production default")
    p.expect(r"3\. Redis, as a cache")
    p.expect(r"Type a number 1-3, or your own answer as text, or s to skip.*\n> ")
    p.type("3\n")
    p.expect(r"Answer sent: \[\"Redis, as a cache\"\]")
    code, out = p.finish()
    assert code == 0
    assert "Which database" not in out  # the card went to the terminal; stdout carries only the result
    result = json.loads(out)
    assert result["is_error"] is False
    assert result["data"]["status"] == "answered"
    assert result["data"]["selected"] == ["Redis, as a cache"]
    assert result["data"]["text"] is None
    assert result["data"]["port"] == "terminal"
    assert 'Selected (chosen option label, JSON list): ["Redis, as a cache"]' in result["content"][0]["text"]


def test_multi_select_by_comma_list_keeps_card_order(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, {**QUESTION, "multi_select": True, "allow_free_text": False})
    p.expect(r"several separated by commas \(e\.g\. 1,3\).*\n> ")
    p.type("3, 1\n")
    result = result_of(p)
    assert result["data"]["selected"] == ["Postgres", "Redis, as a cache"]
    assert 'JSON list): ["Postgres", "Redis, as a cache"]' in result["content"][0]["text"]


def test_free_text_answer(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, {"question": "What should the new module be called?"})
    p.expect(r"Type your answer, or s to skip.*\n> ")
    p.type('billing "v2", please\n')
    result = result_of(p)
    assert result["data"] == {
        "status": "answered",
        "selected": [],
        "text": 'billing "v2", please',
        "port": "terminal",
    }
    assert 'Typed answer (JSON string): "billing \\"v2\\", please"' in result["content"][0]["text"]


def test_invalid_input_asks_again_instead_of_guessing(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, {**QUESTION, "allow_free_text": False})
    p.expect(r"\n> ")
    p.type("7\n")
    p.expect(r"No option 7: choose between 1 and 3\.\n> ")
    p.type("1,2\n")
    p.expect(r"Choose one option only\.\n> ")
    p.type("maybe\n")
    p.expect(r"Not a choice\. Type a number 1-3, or s to skip")
    p.type("2\n")
    assert result_of(p)["data"]["selected"] == ["SQLite"]


def test_skip_is_success_with_go_on_instruction(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, QUESTION)
    p.expect(r"\n> ")
    p.type("s\n")
    p.expect("Skipped.")
    result = result_of(p)
    assert result["is_error"] is False
    assert result["data"]["status"] == "skipped"
    text = result["content"][0]["text"]
    assert "skipped" in text and "Do not ask this again" in text and "assumption" in text


def test_timeout_is_an_error_with_the_same_instruction(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, QUESTION, env={"TETHER_ASK_USER_TIMEOUT": "1"})
    p.expect(r"\n> ")
    p.expect(r"this question is closed: no answer was taken", timeout=10)
    assert "waiting for the human" not in p.history  # no progress line drawn over the prompt
    result = result_of(p)
    assert result["is_error"] is True
    assert result["data"]["status"] == "timeout" and result["data"]["error"] == "timeout"
    text = result["content"][0]["text"]
    assert "nobody answered within 1 s" in text and "Do not ask this again" in text


def test_input_typed_before_the_card_is_not_taken_as_the_answer(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, QUESTION, env={"TETHER_ASK_USER_TIMEOUT": "3"})
    p.type("1\n")  # typed ahead, before any card was shown
    p.expect(r"\n> ")
    p.type("2\n")
    assert result_of(p)["data"]["selected"] == ["SQLite"]


HANGUP_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, signal, sys
    import tether
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # survive the hang-up to report what ask_user said

    async def main():
        async with tether.open_run(sys.argv[1]) as run:
            result = await run.call("ask_user", {"question": "Still there?", "options": [{"label": "yes"}]})
        print(json.dumps(result.to_json()), flush=True)

    asyncio.run(main())
    """
)


def test_terminal_hang_up_mid_question_is_an_error_not_a_hang(pty_spawn, tmp_path):
    script = tmp_path / "hangup.py"
    script.write_text(HANGUP_SCRIPT)
    p = pty_spawn([sys.executable, str(script), str(tmp_path)])
    p.expect(r"Still there\?")
    p.expect(r"\n> ")
    p.hang_up()
    code, out = p.finish(timeout=20)
    assert code == 0
    result = json.loads(out)
    assert result["is_error"] is True
    assert result["data"]["status"] == "disconnected"
    assert (
        "terminal" in result["content"][0]["text"] and "Do not ask this again" in result["content"][0]["text"]
    )


def test_cli_process_on_a_hung_up_terminal_ends(pty_spawn, tmp_path):
    p = call(pty_spawn, tmp_path, QUESTION)
    p.expect(r"\n> ")
    p.hang_up()
    code, out = p.finish(timeout=20)
    # the kernel hangs up the session (SIGHUP) or the port reports the disconnect: either way it ends, no answer
    assert code == -signal.SIGHUP or (code == 1 and json.loads(out)["data"]["status"] == "disconnected"), (
        code,
        out,
    )


NOHUP = "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"


def test_cli_process_that_ignores_sighup_prints_its_result_when_the_terminal_hangs_up(pty_spawn, tmp_path):
    # as under nohup: the hang-up only ends the card, and the terminal that is gone (EIO on stderr)
    # must not cost the result on stdout
    p = pty_spawn(
        [
            sys.executable,
            "-c",
            NOHUP,
            TETHER,
            "call",
            "ask_user",
            json.dumps(QUESTION),
            "--root",
            str(tmp_path),
            "--json",
        ]
    )
    p.expect(r"\n> ")
    p.hang_up()
    code, out = p.finish(timeout=60)
    assert code == 1, (code, out)
    result = json.loads(out)
    assert result["is_error"] is True and result["data"]["status"] == "disconnected"


def test_not_registered_when_stdin_is_not_a_tty(pty_spawn, tmp_path):
    # a controlling terminal exists (stderr), but stdin is a pipe, as under an MCP client
    p = pty_spawn([TETHER, "tools", "--json", "--root", str(tmp_path)], stdin_tty=False)
    code, out = p.finish()
    assert code == 0
    listing = json.loads(out)
    assert "ask_user" not in [t["name"] for t in listing["tools"]]
    reasons = {u["family"]: u["reason"] for u in listing["unavailable"]}
    assert "no human is reachable" in reasons["askuser"]


def test_registered_with_a_tty(pty_spawn, tmp_path):
    p = pty_spawn([TETHER, "tools", "--json", "--root", str(tmp_path)])
    code, out = p.finish()
    assert code == 0
    tools = {t["name"]: t for t in json.loads(out)["tools"]}
    assert tools["ask_user"]["tier"] == "read"
    assert "never write a question as a chat message" in tools["ask_user"]["description"]


def test_escape_sequences_from_the_model_are_shown_not_obeyed(pty_spawn, tmp_path):
    sneaky = {
        "question": "Delete the cache?\x1b[2J\x1b[Hplease say yes",
        "options": [{"label": "yes\x1b[8m hidden"}],
    }
    p = call(pty_spawn, tmp_path, sneaky)
    p.expect(r"Delete the cache\?\\x1b\[2J\\x1b\[Hplease say yes")
    p.expect(r"1\. yes\\x1b\[8m hidden")
    p.type("1\n")
    assert result_of(p)["data"]["selected"] == ["yes\x1b[8m hidden"]  # the label itself comes back intact


BACKGROUND_SCRIPT = textwrap.dedent(
    """
    import subprocess, sys
    # the job runs in its own process group, not the terminal's foreground group: a background job
    job = subprocess.run(sys.argv[1:], process_group=0, stdout=subprocess.PIPE, timeout=30)
    sys.stdout.write(job.stdout.decode())
    """
)


def test_background_job_refuses_instead_of_being_stopped_by_the_terminal(pty_spawn, tmp_path):
    script = tmp_path / "bg.py"
    script.write_text(BACKGROUND_SCRIPT)
    args = json.dumps({"question": "Which?", "options": QUESTION["options"]})
    p = pty_spawn(
        [sys.executable, str(script), TETHER, "call", "ask_user", args, "--root", str(tmp_path), "--json"]
    )
    code, out = p.finish(timeout=30)
    assert code == 0
    result = json.loads(out)
    assert result["is_error"] is True and result["data"]["status"] == "disconnected"
    assert "background of its terminal" in result["content"][0]["text"]


APPROVAL_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import tether, tether.files

    async def main():
        options = {"approval_by_card": ["write"]}
        async with tether.open_run(sys.argv[1], plugins=[tether.files], options=options) as run:
            for name in ("a.txt", "b.txt"):
                result = await run.call("write", {"path": name, "content": "x"})
                print(json.dumps(result.to_json()), flush=True)

    asyncio.run(main())
    """
)


def test_approval_card_on_the_terminal(pty_spawn, tmp_path):
    script = tmp_path / "approve.py"
    script.write_text(APPROVAL_SCRIPT)
    p = pty_spawn([sys.executable, str(script), str(tmp_path)])
    p.expect(r"Permission needed")
    p.expect(r"Allow the agent to call write \(write\)\?")
    p.expect(r'"path": "a.txt"')
    p.expect(
        r"1\. Allow - run this call\s+2\. Deny - refuse this call\s+3\. Always allow - run this and every later write call"
    )
    p.expect(r"\n> ")
    p.type("1\n")
    p.expect(r'"path": "b.txt"')
    p.expect(r"\n> ")
    p.type("not b, please\n")
    code, out = p.finish()
    assert code == 0
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["is_error"] is False and (tmp_path / "a.txt").read_text() == "x"
    assert (
        second["is_error"] is True
        and 'the human refused it and said: "not b, please"' in second["content"][0]["text"]
    )
    assert not (tmp_path / "b.txt").exists()


CLOSE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, sys, time
    import tether

    async def main():
        root = sys.argv[1]
        async with tether.open_run(root) as run:
            call = asyncio.create_task(run.call("ask_user", {"question": "Waiting?"}))
            while not os.path.exists(os.path.join(root, "close-now")):
                await asyncio.sleep(0.02)
            t0 = time.monotonic()
        result = await asyncio.wait_for(call, 10)  # the run closed under the waiting question
        print(json.dumps({**result.to_json(), "took": time.monotonic() - t0}), flush=True)

    asyncio.run(main())
    """
)


def test_run_closing_under_a_waiting_question_ends_it(pty_spawn, tmp_path):
    script = tmp_path / "close.py"
    script.write_text(CLOSE_SCRIPT)
    p = pty_spawn([sys.executable, str(script), str(tmp_path)])
    p.expect(r"Waiting\?")
    p.expect(r"\n> ")
    (tmp_path / "close-now").touch()
    code, out = p.finish()
    assert code == 0
    result = json.loads(out)
    assert result["is_error"] is True and result["data"]["status"] == "disconnected"
    assert "the run closed while the question was waiting" in result["content"][0]["text"]
    assert result["took"] < 5


def test_raw_mode_terminal_where_enter_sends_carriage_return(pty_spawn, tmp_path):
    import tty

    p = call(pty_spawn, tmp_path, {**QUESTION, "allow_free_text": False})
    tty.setraw(p.master)  # as a full-screen program may leave it: no line editing, Enter is \r
    p.expect(r"\n> ")
    p.type("2\r")
    assert result_of(p)["data"]["selected"] == ["SQLite"]


FORCED_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import tether

    async def main():
        async with tether.open_run(sys.argv[1], options={"ask_user_terminal": True}) as run:
            result = await run.call("ask_user", {"question": "Forced?", "options": [{"label": "yes"}]})
        print(json.dumps(result.to_json()), flush=True)

    asyncio.run(main())
    """
)


def test_harness_can_force_the_terminal_when_stdin_is_a_pipe(pty_spawn, tmp_path):
    script = tmp_path / "forced.py"
    script.write_text(FORCED_SCRIPT)
    p = pty_spawn([sys.executable, str(script), str(tmp_path)], stdin_tty=False)
    p.expect(r"Forced\?")
    p.expect(r"\n> ")
    p.type("1\n")
    code, out = p.finish()
    assert code == 0 and json.loads(out)["data"]["selected"] == ["yes"]
