"""Starting a verl run whose trainer is :class:`trainer.verl.ray_trainer.RocRayPPOTrainer`.

verl's (v0) ``TaskRunner`` builds workers, datasets and the trainer inside one Ray actor and
names ``RayPPOTrainer`` directly. Our subclass of it points that name at the RoC trainer
inside the actor's own process (which exists for this run only) and otherwise runs verl's
code unchanged.
"""

from typing import Any


def roc_task_runner() -> Any:
    """The Ray actor class that runs verl's PPO task with the RoC trainer."""
    import ray
    from verl.trainer import main_ppo_v0

    base = main_ppo_v0.TaskRunner.__ray_actor_class__

    class RocTaskRunner(base):  # type: ignore[misc,valid-type]  # verl is untyped
        """verl's TaskRunner, building :class:`RocRayPPOTrainer` instead of ``RayPPOTrainer``."""

        def run(self, config: Any) -> None:
            from trainer.verl.ray_trainer import RocRayPPOTrainer

            main_ppo_v0.RayPPOTrainer = RocRayPPOTrainer
            super().run(config)

    return ray.remote(RocTaskRunner)


def run(config: Any) -> None:
    """Trains with ``config`` on the Ray cluster (``RAY_ADDRESS``) or a local Ray."""
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    run_ppo(config, task_runner_class=roc_task_runner())
