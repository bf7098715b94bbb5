"""A single-process GRPO-RoC trainer: Hugging Face ``generate`` rollouts, torch updates."""
