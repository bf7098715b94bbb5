"""Which stage a step is in."""

import pytest

from trainer.local.config import RSTAR2_STAGES
from trainer.local.train import stage_at


def test_stage_boundaries_of_the_report_recipe() -> None:
    assert stage_at(RSTAR2_STAGES, 0) == (RSTAR2_STAGES[0], 0)
    assert stage_at(RSTAR2_STAGES, 299) == (RSTAR2_STAGES[0], 0)
    assert stage_at(RSTAR2_STAGES, 300) == (RSTAR2_STAGES[1], 300)
    assert stage_at(RSTAR2_STAGES, 385) == (RSTAR2_STAGES[2], 385)
    with pytest.raises(ValueError):
        stage_at(RSTAR2_STAGES, 510)
