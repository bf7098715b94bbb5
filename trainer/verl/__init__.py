"""GRPO-RoC on verl: the adapters that run ``trainer.core`` inside verl's PPO trainer.

- ``agent_loop``: an agent loop registered with verl (``codepool_agent``) that plays
  ``trainer.core``'s multi-turn loop against verl's async rollout servers and codepool;
- ``roc_step`` and ``ray_trainer``: RoC between reward and advantage on verl's batch;
- ``config/``: the report's recipe and a single-node configuration; ``launch``: the
  ``codepool train --engine verl`` entry point.

Nothing is imported here: verl, Ray and torch load only when a submodule is used.
"""
