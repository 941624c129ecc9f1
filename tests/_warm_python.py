"""Fresh Python processes without paying torch's import each time (3-4 s of CPU on CI's
machine, where the damage matrix starts 440 of them): a server process imports torch, and
nothing of wheelops, then forks a child per command. The child is the process the command
would have started, as far as the code under test can tell: its own cwd, environment,
sys.path (PYTHONPATH's entries where Python puts them), sys.argv and sys.orig_argv as
`python -c CODE` or `python -m MODULE ARGS` set them, its stdout and stderr in files, and
an exit that runs the atexit handlers, flushes the streams and runs the loaded libraries'
destructors (C's exit). What differs: torch is imported before the command's first line
(every command here imports it first or through wheelops), the server's start-up
environment is the one torch read, and Python's module teardown is skipped (0.9 s of
every exit of a process that imported torch, on CI's machine).

A command that dies of a signal returns minus the signal's number, as subprocess does; one
past its timeout is killed and raises subprocess.TimeoutExpired."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

_SERVER = r"""
import json, os, sys, time
import torch  # the cost the children share

def serve():
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)  # the server prints nothing; a child's fd 1 is its own file
    for line in sys.stdin:
        commands, timeout = json.loads(line)
        children = {}
        for i, command in enumerate(commands):
            sys.stdout.flush(); sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.dup2(null, 0)
                for fd, name in ((1, "stdout"), (2, "stderr")):
                    os.dup2(os.open(command[name], os.O_WRONLY | os.O_TRUNC), fd)
                return command
            children[pid] = i
        codes = [None] * len(commands)
        deadline = time.monotonic() + timeout
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                codes[children.pop(pid)] = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                for pid in children:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                children = {}
            else:
                time.sleep(0.005)
        replies.write(json.dumps(codes) + "\n")
        replies.flush()
    return None

def run(command):
    import builtins, runpy
    os.chdir(command["cwd"])
    os.environ.clear()
    os.environ.update(command["env"])
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    first = "" if "code" in command else os.getcwd()
    sys.path[0:1] = [first, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    sys.orig_argv = command["orig_argv"]
    try:
        if "code" in command:
            sys.argv = ["-c", *command["args"]]
            main = {"__name__": "__main__", "__builtins__": builtins}
            exec(compile(command["code"], "<string>", "exec"), main)
        else:
            sys.argv = ["-m", *command["args"]]
            runpy._run_module_as_main(command["module"])
        status = 0
    except SystemExit as stop:
        status = stop.code
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    if status is not None and not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    exit_as_python_does(status or 0)

def exit_as_python_does(status):
    # Python's exit but its module teardown (0.9 s of a process that imported torch):
    # the atexit handlers, the streams flushed, then C's exit, which runs the loaded
    # libraries' destructors.
    import atexit, ctypes
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    ctypes.CDLL(None).exit(status & 0xFF)

command = serve()
if command is not None:
    del serve
    run(command)
"""


@dataclass(frozen=True)
class Command:
    """`python -c code ARGS` (code) or `python -m module ARGS` (module), run in cwd with env."""

    cwd: Path
    env: dict[str, str]
    code: str | None = None
    module: str | None = None
    args: Sequence[str] = ()

    @property
    def what(self) -> dict[str, str]:
        """What it runs, as the server takes it: {"code": code} or {"module": module}."""
        return {"code": self.code} if self.code is not None else {"module": str(self.module)}

    @property
    def argv(self) -> list[str]:
        """What Python's own argv would start with: `-c code` or `-m module`."""
        return ["-c", self.code] if self.code is not None else ["-m", str(self.module)]


class WarmPython:
    """One server (per pytest worker and kind of start: preexec_fn, as subprocess takes it,
    applies to the server and so to every child)."""

    def __init__(self, env: dict[str, str], preexec_fn: Callable[[], None] | None = None):
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=preexec_fn,
        )

    def run(self, commands: Sequence[Command], timeout: float) -> list[subprocess.CompletedProcess]:
        """The commands side by side, each in its own forked child; their results in order."""
        with tempfile.TemporaryDirectory() as scratch:
            requests, files = [], []
            for i, command in enumerate(commands):
                out, err = Path(scratch) / f"{i}.out", Path(scratch) / f"{i}.err"
                out.touch()
                err.touch()
                files.append((out, err))
                requests.append(
                    {
                        **command.what,
                        "args": list(command.args),
                        "orig_argv": [sys.executable, *command.argv, *command.args],
                        "cwd": str(command.cwd),
                        "env": command.env,
                        "stdout": str(out),
                        "stderr": str(err),
                    }
                )
            assert self._process.stdin and self._process.stdout
            self._process.stdin.write(json.dumps([requests, timeout]) + "\n")
            self._process.stdin.flush()
            reply = self._process.stdout.readline()
            if not reply:
                raise RuntimeError(f"the warm Python server exited ({self._process.poll()})")
            codes = json.loads(reply)
            done = []
            for command, code, (out, err) in zip(commands, codes, files, strict=True):
                argv = [sys.executable, *command.argv]
                if code is None:
                    raise subprocess.TimeoutExpired(argv, timeout, out.read_text())
                done.append(
                    subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())
                )
            return done

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        self._process.wait(timeout=60)
