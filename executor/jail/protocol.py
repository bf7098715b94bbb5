"""The binary frames of one job: worker -> zygote -> standby child -> zygote -> worker.

Fixed-size ``struct`` headers instead of JSON because of where the zygote runs its per-job
path: between a fork and the child's exit, while it shares every page with its standby child
copy-on-write. Each page it writes then costs a page copy (~2 us here). Decoding a job as JSON
and encoding a result as JSON touched ~100 pages per job; unpacking a header touches a few.
So the zygote reads only its own part of a job (time limit, output caps, stdin) and passes
the child's part on unread; it passes the child's report and the captured bytes back unread,
and the worker, outside the jail, turns them into a result (``executor/job_wire.py``).

The worker imports this module too (stdlib only, like the rest of ``executor.jail``), so both
sides share one definition of every layout.

Job frame (worker -> zygote)::

    JOB_HEAD   frame bytes (after this field), timeout_s, output_cap_bytes,
               output_kill_bytes, stdin_bytes
    stdin      stdin_bytes bytes
    TASK       cpu_time_s, memory_bytes, processes, file_size_bytes, open_files,
               echo_last_expr, code_bytes, files_bytes          (the child's part from here)
    code       UTF-8 (surrogates passed through)
    files      JSON object path -> text, or nothing when there are none

Report (child -> zygote, its last write before it exits): ``REPORT``.

Result frame (zygote -> worker)::

    FRAME      bytes after this field
    RESULT     verdict, reported, report (REPORT bytes, zeros if none), wait_status,
               rusage cpu_s, rusage max RSS in KiB (these two and wait_status only when not
               reported), wall_s, then per stream (stdout, stderr): total bytes, head bytes,
               tail bytes
    bytes      stdout head, stdout tail, stderr head, stderr tail
"""

import struct

FRAME = struct.Struct(">I")
JOB_HEAD = struct.Struct(">IdIII")
JOB_FIELDS_BYTES = JOB_HEAD.size - FRAME.size  # what the frame length counts of the head
TASK = struct.Struct(">dQIQI?II")
REPORT = struct.Struct(">i?dQ")  # exit_code, memory_error, cpu_s, max_rss_bytes
RESULT = struct.Struct(f">BB{REPORT.size}sidQdQIIQII")

# Why the zygote ended a run itself (RESULT's first field); 0: it did not.
VERDICTS = ("", "timeout", "output_limit")
TIMEOUT = VERDICTS.index("timeout")
OUTPUT_LIMIT = VERDICTS.index("output_limit")
