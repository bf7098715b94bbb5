"""What the agent loops of one verl worker share: the codepool client and the answer verifier.

verl builds a new agent-loop object for every trajectory, but concurrent tool calls must go
through one client to be micro-batched into few HTTP requests, and the verifier's process pool
should start once. So each agent-loop worker process keeps one :class:`SharedResources` per
running event loop (verl runs one loop per worker), created on first use and closed with
:func:`close_shared_resources`.
"""

import asyncio
import weakref
from dataclasses import dataclass

from gateway.client import ClientSettings, CodepoolClient
from trainer.core.verify import AnswerVerifier
from trainer.verl.settings import CodepoolSettings


@dataclass
class SharedResources:
    """One worker's codepool client and answer verifier."""

    settings: CodepoolSettings
    client: CodepoolClient
    verifier: AnswerVerifier

    @classmethod
    def open(cls, settings: CodepoolSettings) -> "SharedResources":
        """A client for ``settings.service_url`` and a verifier (its pool starts when needed)."""
        client = CodepoolClient(
            ClientSettings(
                base_url=settings.service_url,
                max_batch_items=settings.client_max_batch_items,
                max_in_flight_requests=settings.client_max_in_flight_requests,
                request_timeout_s=settings.client_request_timeout_s,
            )
        )
        verifier = AnswerVerifier(
            strictness=settings.answer_strictness,
            timeout_s=settings.verify_timeout_s,
            max_workers=settings.verify_workers,
        )
        return cls(settings, client, verifier)

    async def aclose(self) -> None:
        """Closes the client's connections and stops the verifier's processes."""
        await self.client.aclose()
        self.verifier.close()


# One entry per live event loop; an entry goes when its loop is garbage-collected.
_BY_LOOP: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SharedResources]" = (
    weakref.WeakKeyDictionary()
)


def shared_resources(settings: CodepoolSettings) -> SharedResources:
    """This event loop's resources, opened on first use with ``settings``."""
    loop = asyncio.get_running_loop()
    resources = _BY_LOOP.get(loop)
    if resources is None:
        resources = SharedResources.open(settings)
        _BY_LOOP[loop] = resources
    elif resources.settings != settings:
        raise ValueError("agent loops of one worker were configured with different settings")
    return resources


async def close_shared_resources() -> None:
    """Closes this event loop's resources, if any were opened."""
    resources = _BY_LOOP.pop(asyncio.get_running_loop(), None)
    if resources is not None:
        await resources.aclose()
