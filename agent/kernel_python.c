/* kernel_python.c - the persistent python kernel that sbx-agent runs as `python3 -c` for
 * stateful run_code: one namespace per sandbox, kept between calls.
 *
 * Protocol on inherited fds (the program's stdout/stderr stay the command's output pipes):
 *   fd 3 (agent -> kernel): code, cwd (u32 length + bytes each, little endian), then a u32
 *        count of env pairs, each name and value as u32 length + bytes;
 *   fd 4 (kernel -> agent): u32 status (0 ok, 1 exception, 2 SystemExit) and u32 exit code,
 *        then the display of the last expression as u32 length + bytes (at most 4000);
 *   fd 0 (agent -> kernel): each call's stdin as frames (u32 length + bytes), ended by a frame
 *        of length 0, exactly one end per call (the agent sends it at the host's end of stdin,
 *        at once for a call without stdin, or when the call ends first). The kernel moves the
 *        pipe off fd 0 (its programs' children get /dev/null there, as before), gives each call
 *        a sys.stdin that reads the frames, and skips what a call left unread once it replied.
 * The kernel flushes stdout/stderr before it replies, so the agent has every output byte of
 * the call in its pipes when the reply arrives. Exceptions print their traceback to stderr.
 * Everything the kernel sends is untrusted by the agent (the program shares its process).
 *
 * The kernel's first act is to make itself non-dumpable: another program of the session runs as
 * its uid and could otherwise read and write its memory through /proc/PID/mem (its variables,
 * and code of its own run in the kernel) and read its environment and descriptors; they then
 * belong to root. (Its pipes were the agent's: a program cannot open them through /proc/PID/fd.)
 * Left open: the interpreter's start between the kernel's exec and that first line (20-35 ms
 * here; docs/security.md says why it stays).
 */
#include "agent.h"

const char agent_python_kernel[] =
    "try:\n"
    "    __import__('ctypes').CDLL(None).prctl(4, 0, 0, 0, 0)\n" /* PR_SET_DUMPABLE 0 */
    "except Exception:\n"
    "    pass\n"
    "import ast, io, os, struct, sys, traceback\n"
    "_ctl = os.fdopen(3, 'rb', buffering=0)\n"
    "_rep = os.fdopen(4, 'wb', buffering=0)\n"
    "os.set_inheritable(3, False); os.set_inheritable(4, False)\n"
    "_inp = os.fdopen(os.dup(0), 'rb', buffering=0)\n"
    "_nul = os.open('/dev/null', os.O_RDONLY); os.dup2(_nul, 0); os.close(_nul)\n"
    "def _ird(n):\n"
    "    b = b''\n"
    "    while len(b) < n:\n"
    "        c = _inp.read(n - len(b))\n"
    "        if not c:\n"
    "            os._exit(0)\n"
    "        b += c\n"
    "    return b\n"
    "class _Stdin(io.RawIOBase):\n"
    "    def __init__(self):\n"
    "        self.buf, self.eof = b'', False\n"
    "    def readable(self):\n"
    "        return True\n"
    "    def _frame(self):\n"
    "        (n,) = struct.unpack('<I', _ird(4))\n"
    "        if n == 0:\n"
    "            self.eof = True\n"
    "            return b''\n"
    "        return _ird(n)\n"
    "    def readinto(self, b):\n"
    "        while not self.buf and not self.eof:\n"
    "            self.buf = self._frame()\n"
    "        k = min(len(b), len(self.buf))\n"
    "        b[:k] = self.buf[:k]\n"
    "        self.buf = self.buf[k:]\n"
    "        return k\n"
    "    def drain(self):\n"
    "        while not self.eof:\n"
    "            self._frame()\n"
    "def _rd(n):\n"
    "    b = b''\n"
    "    while len(b) < n:\n"
    "        c = _ctl.read(n - len(b))\n"
    "        if not c:\n"
    "            os._exit(0)\n"
    "        b += c\n"
    "    return b\n"
    "def _rs():\n"
    "    (n,) = struct.unpack('<I', _rd(4))\n"
    "    return _rd(n).decode('utf-8', 'replace')\n"
    "_g = {'__name__': '__main__', '__builtins__': __builtins__}\n"
    "while True:\n"
    "    _code = _rs(); _cwd = _rs(); (_n,) = struct.unpack('<I', _rd(4))\n"
    "    for _i in range(_n):\n"
    "        _k = _rs(); os.environ[_k] = _rs()\n"
    "    _status, _exit, _value = 0, 0, ''\n"
    "    _in = _Stdin()\n"
    "    sys.stdin = io.TextIOWrapper(io.BufferedReader(_in), encoding='utf-8', errors='replace')\n"
    "    try:\n"
    "        if _cwd:\n"
    "            os.chdir(_cwd)\n"
    "        _tree = ast.parse(_code, '<cell>', 'exec')\n"
    "        _last = None\n"
    "        if _tree.body and isinstance(_tree.body[-1], ast.Expr):\n"
    "            _last = ast.Expression(_tree.body.pop().value)\n"
    "        exec(compile(_tree, '<cell>', 'exec'), _g)\n"
    "        if _last is not None:\n"
    "            _v = eval(compile(_last, '<cell>', 'eval'), _g)\n"
    "            if _v is not None:\n"
    "                _value = repr(_v)\n"
    "    except SystemExit as _e:\n"
    "        _status = 2\n"
    "        _exit = _e.code if isinstance(_e.code, int) else (0 if _e.code is None else 1)\n"
    "        if _e.code is not None and not isinstance(_e.code, int):\n"
    "            print(_e.code, file=sys.stderr)\n"
    "    except BaseException as _e:\n"
    "        _status, _exit = 1, 1\n"
    "        _tb = _e.__traceback__\n"
    "        if _tb is not None and not isinstance(_e, SyntaxError):\n"
    "            _tb = _tb.tb_next\n"
    "        traceback.print_exception(type(_e), _e, _tb)\n"
    "    try:\n"
    "        sys.stdout.flush(); sys.stderr.flush()\n"
    "    except BaseException:\n"
    "        pass\n"
    "    _vb = _value.encode('utf-8', 'replace')[:4000]\n"
    "    _rep.write(struct.pack('<IiI', _status, _exit & 0xff, len(_vb)) + _vb)\n"
    "    _in.drain()\n";
