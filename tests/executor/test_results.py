"""What a job's result says: statuses, exit codes, output, echo, stdin, files, randomness."""

from executor.jobs import Status
from tests.executor.conftest import RunCode


async def test_ok_with_output_and_timings(run_code: RunCode) -> None:
    result = await run_code("print(1 + 1)")
    assert result.status == Status.OK
    assert (result.exit_code, result.signal) == (0, None)
    assert (result.stdout, result.stderr) == ("2\n", "")
    assert 0 < result.wall_s < 1
    assert result.cpu_s > 0
    assert result.max_rss_bytes is not None and result.max_rss_bytes > 1_000_000


async def test_exception_is_error_with_the_users_traceback(run_code: RunCode) -> None:
    result = await run_code("def f():\n    return 1 / 0\nf()")
    assert (result.status, result.exit_code) == (Status.ERROR, 1)
    assert 'File "<code>", line 2, in f' in result.stderr
    assert "return 1 / 0" in result.stderr
    assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "zygote" not in result.stderr


async def test_syntax_error_is_error(run_code: RunCode) -> None:
    result = await run_code("def broken(:\n  pass")
    assert result.status == Status.ERROR
    assert "SyntaxError" in result.stderr


async def test_exit_codes(run_code: RunCode) -> None:
    assert (await run_code("import sys; sys.exit(0)")).status == Status.OK
    three = await run_code("import sys; sys.exit(3)")
    assert (three.status, three.exit_code) == (Status.ERROR, 3)
    message = await run_code("raise SystemExit('bye')")
    assert (message.status, message.stderr) == (Status.ERROR, "bye\n")
    direct = await run_code("import os; print('x', flush=True); os._exit(4)")
    assert (direct.status, direct.exit_code, direct.stdout) == (Status.ERROR, 4, "x\n")


async def test_signal_death_is_killed(run_code: RunCode) -> None:
    result = await run_code("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert (result.status, result.signal, result.exit_code) == (Status.KILLED, "SIGSEGV", None)


async def test_echo_of_the_final_expression(run_code: RunCode) -> None:
    echoed = await run_code("x = 6\nx * 7", echo_last_expr=True)
    assert echoed.stdout == "42\n"
    assert (await run_code("x = 6\nx * 7")).stdout == ""
    assert (await run_code("print('a')", echo_last_expr=True)).stdout == "a\n"  # None: no echo
    assert (await run_code("'s'", echo_last_expr=True)).stdout == "'s'\n"


async def test_stdin_and_files(run_code: RunCode) -> None:
    result = await run_code(
        "import helper, sys\n"
        "print(helper.double(int(sys.stdin.read())), open('data/in.txt').read())",
        stdin="21",
        files={"helper.py": "def double(x):\n    return 2 * x\n", "data/in.txt": "hello"},
    )
    assert (result.status, result.stdout) == (Status.OK, "42 hello\n"), result.stderr


async def test_each_job_gets_fresh_randomness(run_code: RunCode) -> None:
    code = "import random, numpy; print(random.random(), numpy.random.rand())"
    first, second = await run_code(code), await run_code(code)
    assert first.status == Status.OK
    assert first.stdout != second.stdout


async def test_globals_do_not_leak_between_jobs(run_code: RunCode) -> None:
    await run_code("import numpy; numpy.LEAK = 1; x_global = 5")
    result = await run_code("import numpy; print(hasattr(numpy, 'LEAK'), 'x_global' in globals())")
    assert result.stdout == "False False\n"


async def test_preloaded_scientific_stack(run_code: RunCode) -> None:
    code = """
import sys
print(all(m in sys.modules for m in ("numpy", "sympy", "scipy", "math_verify")))
import numpy, sympy, scipy.linalg
from math_verify import parse, verify
print(sympy.factorint(2**32 + 1), int(numpy.linalg.det(numpy.eye(3))))
print(verify(parse("$1/2$"), parse("$0.5$")))
"""
    result = await run_code(code)
    assert result.stdout == "True\n{641: 1, 6700417: 1} 1\nTrue\n", result.stderr


async def test_moderate_output_is_kept_head_and_tail_with_a_marker(run_code: RunCode) -> None:
    result = await run_code("for i in range(20000): print(i)")
    assert result.status == Status.OK
    assert result.stdout_truncated and not result.stderr_truncated
    assert result.stdout.startswith("0\n1\n2\n")
    assert result.stdout.endswith("19998\n19999\n")
    assert "[... codepool:" in result.stdout


async def test_a_prepared_standby_starts_the_job_as_a_script_would(run_code: RunCode) -> None:
    # The standby child prepares itself before its job arrives; none of it may show.
    code = """
import os, signal, sys
print(os.getcwd(), sys.path[0], sorted(k for k in globals() if not k.startswith('__')))
print(len(os.listdir('/proc/self/fd')) >= 3)  # dumpable again: its own /proc is readable
try:
    os.kill(os.getpid(), signal.SIGINT)
except KeyboardInterrupt:
    print('KeyboardInterrupt')
"""
    result = await run_code(code)
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "/work /work ['os', 'signal', 'sys']\nTrue\nKeyboardInterrupt\n"
    assert result.cpu_s is not None and result.cpu_s < 1.0
