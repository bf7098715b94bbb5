"""GRPO-RoC without a framework: tool calls, the agent loop, reward, RoC, advantages, metrics.

Nothing here imports torch, transformers or verl, so the local trainer and the verl adapter
share it unchanged.
"""
