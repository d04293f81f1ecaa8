#!/usr/bin/env python3
"""`lossjit repl` on a terminal: drives it over a pseudo-terminal, as a person would.

Shows that with a terminal the REPL uses readline: the prompt appears, a line evaluates, the up
arrow recalls the history (also from the history file of an earlier session), Ctrl-C drops the
line being typed and keeps the session, :quit and Ctrl-D leave with status 0.

    tests/repl_pty.py build/lossjit
"""
import fcntl
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import termios
import time

PROMPT = "lossjit> "
UP = "\x1b[A"


class Session:
    def __init__(self, cli, env):
        master, slave = pty.openpty()
        def controlling_terminal():  # as a login shell has it, so that Ctrl-C sends SIGINT
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen([cli, "repl", "--cpu"], stdin=slave, stdout=slave, stderr=slave,
                                        env=env, close_fds=True, preexec_fn=controlling_terminal)
        os.close(slave)
        self.master = master
        self.text = ""  # everything the terminal showed, escape sequences removed
        self.seen = 0   # how far expect() has matched

    def read(self, timeout):
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 4096)
        except OSError:  # the other side closed
            return False
        if not data:
            return False
        # Drop terminal control sequences (bracketed paste, cursor moves) and carriage returns.
        chunk = data.decode("utf-8", "replace")
        chunk = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r", "", chunk)
        self.text += chunk
        return True

    def expect(self, pattern, timeout=60):
        deadline = time.time() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.text, self.seen)
            if match:
                self.seen = match.end()
                return match
            if time.time() > deadline or (not self.read(min(1.0, max(0.0, deadline - time.time())))
                                          and self.process.poll() is not None):
                raise AssertionError(f"expected {pattern!r} after:\n{self.text[:self.seen]}\n"
                                     f"---- but the terminal showed only:\n{self.text[self.seen:]}")

    def send(self, keys):
        os.write(self.master, keys.encode())

    def wait(self, timeout=30):
        deadline = time.time() + timeout
        while self.process.poll() is None and time.time() < deadline:
            self.read(0.2)
        if self.process.poll() is None:
            self.process.kill()
            raise AssertionError("the REPL did not exit")
        while self.read(0.1):
            pass
        os.close(self.master)
        return self.process.returncode


def main():
    cli = sys.argv[1]
    work = tempfile.mkdtemp(prefix="lossjit-repl-pty-")
    try:
        env = dict(os.environ, TERM="dumb", LOSSJIT_HISTORY=os.path.join(work, "history"),
                   LOSSJIT_CACHE_DIR=os.path.join(work, "cache"), INPUTRC=os.path.join(work, "inputrc"))
        with open(env["INPUTRC"], "w") as f:
            f.write("set enable-bracketed-paste off\n")

        s = Session(cli, env)
        s.expect(r":help for the commands")
        s.expect(re.escape(PROMPT))
        s.send(":input x=4:range\r")
        s.expect(r"x: 4 from range\n")
        s.expect(re.escape(PROMPT))
        s.send("sum(x)\r")
        s.expect(r"\n6\n")
        s.expect(re.escape(PROMPT))
        s.send(UP + "\r")  # readline's history: the same line again
        s.expect(r"sum\(x\)\n6\n")
        s.expect(re.escape(PROMPT))
        s.send("mean(lgo(x))\r")
        s.expect(r"expr:1:6: error: unknown function 'lgo' \(did you mean 'log'\?\)\nmean\(lgo\(x\)\)\n     \^\n")
        s.expect(re.escape(PROMPT))
        s.send("abc")
        s.expect("abc")
        s.send("\x03")  # Ctrl-C: the line is dropped, the session goes on
        s.expect(r"\^C\n" + re.escape(PROMPT))
        s.send("sum(x * 2)\r")
        s.expect(r"\n12\n")
        s.expect(re.escape(PROMPT))
        s.send(":quit\r")
        status = s.wait()
        assert status == 0, f":quit gave exit status {status}"

        history = open(env["LOSSJIT_HISTORY"]).read()
        assert "sum(x)\n" in history and "sum(x * 2)\n" in history, f"history file:\n{history}"
        assert "abc" not in history, f"an interrupted line reached the history:\n{history}"

        # A new session finds the history; Ctrl-D leaves.
        s = Session(cli, env)
        s.expect(re.escape(PROMPT))
        s.send(UP + UP + "\r")  # :quit, then sum(x * 2): x is not an input of this session
        s.expect(r"unknown name 'x'")
        s.expect(re.escape(PROMPT))
        s.send("\x04")
        status = s.wait()
        assert status == 0, f"Ctrl-D gave exit status {status}"

        # An unwritable history file is no reason to fail.
        env["LOSSJIT_HISTORY"] = "/proc/lossjit/history"
        s = Session(cli, env)
        s.expect(re.escape(PROMPT))
        s.send("1 + 2\r")
        s.expect(r"map of shape scalar: 3 ")
        s.send(":q\r")
        status = s.wait()
        assert status == 0, f"with an unwritable history file: exit status {status}"
        print("repl over a pseudo-terminal: ok")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
