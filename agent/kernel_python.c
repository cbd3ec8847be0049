/* kernel_python.c - the persistent python kernel that sbx-agent runs as `python3 -c` for
 * stateful run_code: one namespace per sandbox, kept between calls.
 *
 * Protocol on inherited fds (the program's stdout/stderr stay the command's output pipes):
 *   fd 3 (agent -> kernel): code, cwd (u32 length + bytes each, little endian), then a u32
 *        count of env pairs, each name and value as u32 length + bytes;
 *   fd 4 (kernel -> agent): u32 status (0 ok, 1 exception, 2 SystemExit) and u32 exit code,
 *        then the display of the last expression as u32 length + bytes (at most 4000).
 * The kernel flushes stdout/stderr before it replies, so the agent has every output byte of
 * the call in its pipes when the reply arrives. Exceptions print their traceback to stderr.
 * Everything the kernel sends is untrusted by the agent (the program shares its process).
 */
#include "agent.h"

const char agent_python_kernel[] =
    "import ast, os, struct, sys, traceback\n"
    "_ctl = os.fdopen(3, 'rb', buffering=0)\n"
    "_rep = os.fdopen(4, 'wb', buffering=0)\n"
    "os.set_inheritable(3, False); os.set_inheritable(4, False)\n"
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
    "    _rep.write(struct.pack('<IiI', _status, _exit & 0xff, len(_vb)) + _vb)\n";
