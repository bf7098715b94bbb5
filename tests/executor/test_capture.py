"""The zygote's head-and-tail output capture (a pure class, tested directly)."""

from executor.jail.capture import Capture


def test_small_output_is_kept_whole() -> None:
    capture = Capture(10)
    capture.feed(b"abc")
    capture.feed(b"de")
    assert (capture.text(), capture.truncated) == ("abcde", False)


def test_exactly_the_cap_is_not_truncated() -> None:
    capture = Capture(10)
    capture.feed(b"0123456789")
    assert (capture.text(), capture.truncated) == ("0123456789", False)


def test_overflow_keeps_head_and_tail_and_counts_the_rest() -> None:
    capture = Capture(10)
    for chunk in (b"01234", b"abcdefghij", b"XYZ", b"vwxyz"):
        capture.feed(chunk)
    assert capture.truncated
    assert capture.total_bytes == 23
    assert capture.text() == "01234\n[... codepool: 13 bytes truncated ...]\nvwxyz"


def test_invalid_utf8_is_replaced_not_raised() -> None:
    capture = Capture(100)
    capture.feed(b"ok \xff\xfe")
    assert capture.text() == "ok \ufffd\ufffd"
