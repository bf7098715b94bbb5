"""The jail's clean-up between jobs, as a module (its effect on jobs: test_containment)."""

import pytest

from executor.jail import cleanup


def test_wiping_before_the_work_dirs_are_recorded_fails_instead_of_doing_nothing() -> None:
    assert cleanup._work_dirs == ()  # a fresh import, as in a zygote before record_work_dirs
    with pytest.raises(RuntimeError, match="record_work_dirs"):
        cleanup.wipe_work_dirs()
