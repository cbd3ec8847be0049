#!/usr/bin/python3
"""test_cli_json.py - `sbx --json` prints exactly one JSON document on stdout, in protobuf's
canonical JSON mapping of ExecutionCompletion: Python's protobuf (an independent parser) reads
it into the generated ExecutionCompletion, and printing that message back gives the same
document (names, base64 bytes, enum names, 64-bit integers as strings, defaults omitted).
Empty, binary and large outputs; errors before any completion too.
"""
import hashlib
import json
import unittest

from google.protobuf import json_format

import cli_util

pb = None


class Json(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        global pb
        pb = cli_util.protos()
        cls.e = cli_util.Env()

    @classmethod
    def tearDownClass(cls):
        cls.e.close()

    def completion(self, *args, want_rc=0, **kw):
        r = self.e.run("--json", *args, **kw)
        self.assertEqual(r.returncode, want_rc, r.stderr)
        text = r.stdout.decode("utf-8")  # strict: the document is UTF-8
        doc = json.loads(text)  # exactly one document: trailing data is an error
        c = json_format.Parse(text, pb.ExecutionCompletion())  # unknown names are errors
        self.assertEqual(json_format.MessageToDict(c), doc)  # the canonical mapping itself
        return c, doc

    def test_empty_output(self):
        c, doc = self.completion("run", "--", "true")
        self.assertEqual(c.status, pb.COMPLETION_STATUS_SUCCEEDED)
        self.assertEqual(c.result.outcome, pb.OUTCOME_OK)
        self.assertEqual(c.result.stdout, b"")
        self.assertIn("result", doc)
        self.assertNotIn("stdout", doc["result"])  # a default is omitted
        self.assertIsInstance(doc["result"]["wallUs"], str)  # uint64 as a string
        self.assertIsInstance(doc["session"]["createdAtMs"], str)  # int64 as a string
        self.assertEqual(doc["status"], "COMPLETION_STATUS_SUCCEEDED")

    def test_binary_output(self):
        c, doc = self.completion("run", "--", "sh", "-c",
                                 r"printf '\377\000\001\200abc'; printf '\376' >&2; exit 3",
                                 want_rc=3)
        self.assertEqual(c.result.stdout, b"\xff\x00\x01\x80abc")
        self.assertEqual(c.result.stderr, b"\xfe")
        self.assertEqual(c.result.exit_code, 3)
        self.assertEqual(doc["result"]["stdout"], "/wABgGFiYw==")

    def test_large_output(self):
        n = 4 << 20
        c, _ = self.completion("run", "--", "sh", "-c",
                               "head -c %d /dev/urandom >/tmp/f; cat /tmp/f; cat /tmp/f >&2; "
                               "sha256sum </tmp/f >&2" % n)
        self.assertEqual(len(c.result.stdout), n)
        self.assertFalse(c.result.stdout_truncated)
        digest = c.result.stderr[n:].split()[0].decode()
        self.assertEqual(hashlib.sha256(c.result.stdout).hexdigest(), digest)
        self.assertEqual(c.result.stderr[:n], c.result.stdout)

    def test_code_value_and_text(self):
        c, _ = self.completion("code", "-l", "python", "print('h\\u00e9'); 6*7")
        self.assertEqual(c.result.stdout.decode(), "h\u00e9\n")
        self.assertEqual(c.result.value, "42")

    def test_errors_are_completions_too(self):
        c, doc = self.completion("run", "--profile", "nope", "true", want_rc=3)
        self.assertEqual(c.status, pb.COMPLETION_STATUS_FAILED)
        self.assertEqual(c.error_code, pb.ERROR_CODE_CONFIG)
        self.assertIn("nope", c.error)
        c, _ = self.completion("exec", "--session", "no-such", "true", want_rc=6)
        self.assertEqual(c.error_code, pb.ERROR_CODE_SESSION_NOT_FOUND)
        c, _ = self.completion("code", "-l", "cobol", "x", want_rc=4)
        self.assertEqual(c.error_code, pb.ERROR_CODE_CAPABILITY)
        c, _ = self.completion("run", "--timeout-ms=300", "sleep", "30", want_rc=5)
        self.assertEqual(c.result.outcome, pb.OUTCOME_TIMED_OUT)

    def test_text_that_is_not_utf8_gets_a_replacement_character_per_bad_byte(self):
        # The error quotes the argument's bytes; the document must stay UTF-8 (the strict decode
        # in completion() fails otherwise), each byte of a bad sequence one U+FFFD: a lone
        # 0xff, an overlong NUL (c0 80) and a UTF-16 surrogate (ed a0 80), around valid text.
        c, _ = self.completion("run", "--profile", b"p\xff\xc0\x80-\xed\xa0\x80\xc3\xa9",
                               "true", want_rc=3)
        self.assertIn("unknown profile 'p\ufffd\ufffd\ufffd-\ufffd\ufffd\ufffd\u00e9'", c.error)

    def test_session_json(self):
        r = self.e.run("--json", "session", "new", "--name", "json.test")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["name"], "json.test")
        c, _ = self.completion("exec", "-s", doc["session_id"], "--", "printf", "\\377")
        self.assertEqual(c.result.stdout, b"\xff")
        self.assertEqual(self.e.run("session", "rm", doc["session_id"]).returncode, 0)


if __name__ == "__main__":
    cli_util.main()
