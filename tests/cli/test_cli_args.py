#!/usr/bin/python3
"""test_cli_args.py - the built `sbx` against the local provider (the built-in default): option
parsing as in every other CLI (--opt=value and --opt value, "needs a value", options end at the
program's first word and at `--`, --help and --version everywhere), the exit codes of README's
table for run/exec/code, and the bash completion script.
"""
import os
import subprocess
import unittest

import cli_util
from cli_util import SBX


class WithEnv(unittest.TestCase):
    """One private HOME (cli_util.Env) for the tests of a class."""

    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()

    @classmethod
    def tearDownClass(cls):
        cls.e.close()


class Arguments(WithEnv):
    def test_options_end_at_the_program(self):
        r = self.e.run("run", "echo", "--json", "hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"--json hello\n")
        r = self.e.run("run", "--", "echo", "--profile", "x")
        self.assertEqual(r.stdout, b"--profile x\n")
        r = self.e.run("run", "sh", "-c", "echo $0 $1", "--help", "--version")
        self.assertEqual(r.stdout, b"--help --version\n")

    def test_equals_and_separate_values(self):
        for args in (["--profile=default"], ["--profile", "default"], ["--timeout-ms=60000"]):
            r = self.e.run("run", *args, "--", "echo", "ok")
            self.assertEqual((r.returncode, r.stdout), (0, b"ok\n"), (args, r.stderr))
        r = self.e.run("--json", "run", "--profile=default", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(b"{"), r.stdout)

    def test_missing_value(self):
        for args in (["run", "--profile"], ["exec", "--session"], ["code", "-l"],
                     ["--config"], ["session", "new", "--name"]):
            r = self.e.run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(b"needs a value", r.stderr, args)

    def test_code_language_as_operand(self):
        # `sbx code python CODE` names the fix (-l), not only "one CODE argument only"
        r = self.e.run("code", "python", "print(1)")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"the language goes with -l: sbx code -l python CODE", r.stderr)
        r = self.e.run("code", "-l", "python", "print(1)", "print(2)")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"one CODE argument only (quote it)", r.stderr)

    def test_unknown_option_and_flag_value(self):
        r = self.e.run("run", "--frobnicate", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"unknown option '--frobnicate'", r.stderr)
        self.assertNotIn(b"did you mean", r.stderr)
        # a near miss names the option meant: a start of it, or a letter or two off
        for typed, meant in (("--timout=5s", "--timeout"), ("--profle=p", "--profile"),
                             ("--conf=x", "--config")):
            r = self.e.run("run", typed, "true")
            self.assertEqual(r.returncode, 2, typed)
            self.assertIn(b"did you mean " + meant.encode() + b"?", r.stderr, typed)
        r = self.e.run("exec", "--sessio=s", "true")
        self.assertIn(b"did you mean --session?", r.stderr)
        r = self.e.run("run", "--json=yes", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"takes no value", r.stderr)

    def test_version_and_help(self):
        r = self.e.run("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.decode(), r"^sbx \d+\.\d+")
        for cmd in ("run", "exec", "code", "session", "cp", "providers", "config", "replay",
                    "version", "worker"):
            r = self.e.run(cmd, "--help")
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn(b"Usage: sbx " + cmd.encode(), r.stdout, cmd)
            r = self.e.run(cmd, "--version")
            self.assertEqual(r.returncode, 0, cmd)
        r = self.e.run("code", "-h")
        self.assertIn(b"Usage: sbx code", r.stdout)

    def test_short_options(self):
        r = self.e.run("code", "-lpython", "print(6*7)")
        self.assertEqual((r.returncode, r.stdout), (0, b"42\n"), r.stderr)
        r = self.e.run("code", "-l", "bash", "echo $((6*7))")
        self.assertEqual((r.returncode, r.stdout), (0, b"42\n"), r.stderr)


class ExitCodes(WithEnv):
    """README's table: 2 usage, 3 config, 4 refused, 5 timeout, 6 no session; the program's
    own status otherwise."""

    def rc(self, *args, **kw):
        return self.e.run(*args, **kw).returncode

    def test_program_status(self):
        self.assertEqual(self.rc("run", "sh", "-c", "exit 7"), 7)
        self.assertEqual(self.rc("run", "sh", "-c", "kill -TERM $$"), 128 + 15)
        self.assertEqual(self.rc("code", "-l", "python", "import sys; sys.exit(3)"), 3)

    def test_timeout_is_5_not_137(self):
        r = self.e.run("run", "--timeout-ms", "300", "--", "sleep", "30")
        self.assertEqual(r.returncode, 5, r.stderr)
        sid = self.e.run("session", "new").stdout.decode().strip()
        try:
            self.assertEqual(self.rc("exec", "--session", sid, "--timeout-ms=300", "sleep", "30"),
                             5)
        finally:
            self.e.run("session", "rm", sid)

    def test_timeout_takes_a_duration_in_run_exec_and_code(self):
        # `--timeout 300ms` as kubectl and timeout(1) take it; `sbx code` had no time limit of
        # its own at all (unknown option, exit 2): a runaway loop ran to the profile's 120 s
        r = self.e.run("code", "-l", "python", "--timeout", "300ms", "while True: pass")
        self.assertEqual(r.returncode, 5, r.stderr)
        self.assertEqual(self.rc("code", "-l", "python", "--timeout-ms=300", "while True: pass"),
                         5)
        self.assertEqual(self.rc("run", "--timeout=0.3s", "--", "sleep", "30"), 5)
        self.assertEqual(self.rc("run", "--timeout", "1m30s", "--", "true"), 0)
        sid = self.e.run("session", "new").stdout.decode().strip()
        try:
            self.assertEqual(self.rc("exec", "--session", sid, "--timeout=300ms", "sleep", "30"),
                             5)
        finally:
            self.e.run("session", "rm", sid)
        # no unit ("5": seconds or milliseconds?), a sign, an exponent, under a millisecond, past
        # the engine's week: usage errors naming the option and what it takes
        for bad in ("5", "-1s", "1e3s", "0.5ms", "169h", "1m5", "s"):
            r = self.e.run("run", "--timeout", bad, "true")
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn(b"--timeout needs a duration with its unit", r.stderr, bad)
            self.assertIn(b"'" + bad.encode() + b"'", r.stderr, bad)
        # --timeout-ms past the engine's week: refused (exit 2) before anything runs, with the
        # bound to ask for instead
        r = self.e.run("run", "--timeout-ms", "604800001", "true")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"timeout_ms 604800001 is above its bound 604800000", r.stderr)
        # a duration past the profile's limit is a widening like any other (exit 4)
        r = self.e.run("run", "--timeout", "1h", "true")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(b"timeout_ms 3600000", r.stderr)

    def test_refused_is_4(self):
        r = self.e.run("code", "-l", "cobol", "x")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(b"CAPABILITY", r.stderr)

    def test_missing_session_is_6(self):
        self.assertEqual(self.rc("exec", "--session", "no-such-session", "--", "true"), 6)
        self.assertEqual(self.rc("code", "-l", "python", "--session=no-such", "1"), 6)

    def test_usage_is_2_and_config_is_3(self):
        self.assertEqual(self.rc("run"), 2)
        self.assertEqual(self.rc("exec", "--", "true"), 2)
        self.assertEqual(self.rc("run", "--timeout-ms=-1", "true"), 2)
        self.assertEqual(self.rc("run", "--profile", "nope", "true"), 3)
        self.assertEqual(self.rc("--config", "/nonexistent/sbx.yaml", "run", "true"), 3)


class PolicyOptions(WithEnv):
    """`sbx run`, `sbx code` and `sbx exec` narrow the profile's policy for one call
    (--memory-mb, --pids, --network, --allow, --cpu, --disk-mb, --strict); a wider value is
    refused (4), a malformed one is a usage error (2) naming the option. Before, only a profile
    could set them."""

    def test_a_narrower_limit_holds(self):
        hog = "x = bytearray(200 * 1024 * 1024); print('allocated')"
        r = self.e.run("run", "--memory-mb", "64", "--", "python3", "-c", hog)
        self.assertEqual(r.returncode, 128 + 9, r.stderr)
        self.assertNotIn(b"allocated", r.stdout)
        self.assertIn(b"killed for running out of memory", r.stderr)
        r = self.e.run("code", "-l", "python", "--memory-mb=64", hog)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"allocated", r.stdout)
        r = self.e.run("run", "--pids", "3", "--", "sh", "-c",
                       "for i in 1 2 3 4 5 6; do sleep 1 & done; wait")
        self.assertIn(b"fork", r.stderr.lower())
        r = self.e.run("run", "--cpu", "0.5", "--disk-mb", "16", "--strict", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_in_a_session_they_hold_from_its_first_command(self):
        hog = "x = bytearray(200 * 1024 * 1024); print('allocated')"
        sid = self.e.run("session", "new").stdout.decode().strip()
        self.addCleanup(self.e.run, "session", "rm", sid)
        r = self.e.run("exec", "--session", sid, "--memory-mb", "64", "--", "python3", "-c", hog)
        self.assertEqual(r.returncode, 128 + 9, r.stderr)
        # without the option: the sandbox's limit still holds
        r = self.e.run("exec", "--session", sid, "--", "python3", "-c", hog)
        self.assertEqual(r.returncode, 128 + 9, r.stderr)
        r = self.e.run("exec", "--session", sid, "--memory-mb", "32", "--", "true")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(b"memory_mb 64 > 32", r.stderr)
        r = self.e.run("exec", "--session", sid, "--memory-mb", "64", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_wider_one_is_refused(self):
        for args in (["--network", "allow"], ["--allow", "example.com"]):
            r = self.e.run("run", *args, "--", "true")
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertIn(b"widens profile 'default'", r.stderr)

    def test_malformed_values_name_the_option(self):
        for opt, value in (("--memory-mb", "0"), ("--memory-mb", "lots"), ("--cpu", "0"),
                           ("--cpu", "nan"), ("--pids", str(2**32)), ("--network", "none"),
                           ("--allow", "")):
            r = self.e.run("run", opt, value, "--", "true")
            self.assertEqual(r.returncode, 2, (opt, value, r.stderr))
            self.assertIn(opt.encode(), r.stderr)


class SessionRm(unittest.TestCase):
    """A session whose sandbox cannot be reached any more (its profile now uses another
    provider) is kept by `session rm`, which says how to drop it; `rm --forget` drops it and
    names the sandbox it leaves. Before, nothing could remove it from `session ls`."""

    def test_a_session_of_a_profile_that_moved_is_forgotten_with_forget(self):
        e = cli_util.Env()
        self.addCleanup(e.close)
        cfg = os.path.join(e.tmp, "sbx.yaml")

        def config(kind):
            with open(cfg, "w") as f:
                f.write("sandbox:\n  profiles:\n    default: { type: %s, scope: per_session }\n"
                        % kind)

        config("fake")
        sid = e.run("--config", cfg, "session", "new").stdout.decode().strip()
        r = e.run("--config", cfg, "exec", "--session", sid, "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        config("local")
        r = e.run("--config", cfg, "session", "rm", sid)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(b"now uses 'local'", r.stderr)
        self.assertIn(("`sbx session rm --forget %s`" % sid).encode(), r.stderr)
        self.assertIn(sid.encode(), e.run("--config", cfg, "session", "ls").stdout)
        r = e.run("--config", cfg, "session", "rm", "--forget", sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"forgotten; its sandbox fk-", r.stderr)
        self.assertIn(b"(provider fake) was not destroyed", r.stderr)
        self.assertNotIn(sid.encode(), e.run("--config", cfg, "session", "ls").stdout)
        r = e.run("--config", cfg, "session", "ls", "--forget")
        self.assertEqual(r.returncode, 2, r.stderr)


class ActionSynonyms(unittest.TestCase):
    """`session` and `snapshot` take the usual synonyms of their actions, whichever each calls
    it (create/new, list/ls, remove/delete/rm), as docker's CLI does. Before, `sbx session
    create` (after `sbx snapshot create`) and `sbx session list` were usage errors."""

    def test_session_and_snapshot_synonyms(self):
        e = cli_util.Env()
        self.addCleanup(e.close)
        cfg = os.path.join(e.tmp, "sbx.yaml")
        with open(cfg, "w") as f:
            f.write("sandbox:\n  profiles:\n    default: { type: fake, scope: per_session }\n")
        sids = []
        for new in ("new", "create"):
            r = e.run("--config", cfg, "session", new)
            self.assertEqual(r.returncode, 0, (new, r.stderr))
            sids.append(r.stdout.decode().strip())
        for ls in ("ls", "list"):
            r = e.run("--config", cfg, "session", ls)
            self.assertEqual(r.returncode, 0, (ls, r.stderr))
            for sid in sids:
                self.assertIn(sid.encode(), r.stdout, ls)
        for rm, sid in zip(("remove", "delete"), sids):
            r = e.run("--config", cfg, "session", rm, sid)
            self.assertEqual(r.returncode, 0, (rm, r.stderr))
            self.assertNotIn(sid.encode(), e.run("--config", cfg, "session", "ls").stdout, rm)
        for ls in ("ls", "list"):
            r = e.run("--config", cfg, "snapshot", ls)
            self.assertEqual((r.returncode, r.stdout.split()[:1]), (0, [b"NAME"]), (ls, r.stderr))
        # the snapshot's own word for each action reaches the same checks
        r = e.run("--config", cfg, "snapshot", "new", "only-one")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"create needs SESSION and NAME", r.stderr)
        r = e.run("--config", cfg, "snapshot", "delete")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"rm needs at least one NAME", r.stderr)
        # a word that is none of them is still named, with the command's own list
        r = e.run("--config", cfg, "session", "make")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"unknown action 'make' (new, ls, rm)", r.stderr)


class Completion(unittest.TestCase):
    """cli/sbx.bash completes commands, a command's options and fixed values."""

    SCRIPT = os.path.join(os.environ.get("SBX_SOURCE_DIR", ""), "cli", "sbx.bash")

    def complete(self, line):
        words = line.split(" ")
        prog = ("source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _sbx; printf '%%s\\n' "
                "\"${COMPREPLY[@]}\"" % (self.SCRIPT, " ".join("'%s'" % w for w in words),
                                         len(words) - 1))
        r = subprocess.run(["bash", "-c", prog], stdout=subprocess.PIPE, timeout=60,
                           env=dict(os.environ, PATH=os.path.dirname(SBX) + ":" +
                                    os.environ.get("PATH", "")))
        return r.stdout.decode().split()

    def test_commands(self):
        self.assertIn("run", self.complete("sbx r"))
        self.assertEqual(sorted(self.complete("sbx se")), ["session"])
        self.assertIn("--version", self.complete("sbx --v"))

    def test_options_and_values(self):
        self.assertIn("--timeout-ms", self.complete("sbx run --t"))
        self.assertIn("--timeout", self.complete("sbx code --t"))
        self.assertIn("--json", self.complete("sbx run --j"))
        self.assertEqual(self.complete("sbx --broker th"), ["thread"])
        self.assertEqual(sorted(self.complete("sbx session ")), ["ls", "new", "rm"])
        self.assertIn("default", self.complete("sbx run --profile "))

    def test_detached_commands(self):
        self.assertEqual(self.complete("sbx at"), ["attach"])
        self.assertEqual(self.complete("sbx ki"), ["kill"])
        self.assertIn("--detach", self.complete("sbx exec --de"))
        self.assertEqual(sorted(self.complete("sbx attach --")),
                         sorted(["--offset", "--stderr-offset"] + self.complete("sbx --")))
        self.assertEqual(self.complete("sbx kill --signal 1"), ["1", "15"])


if __name__ == "__main__":
    cli_util.main()
