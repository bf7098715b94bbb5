"""The toy task that proves the loop learns: a tiny Qwen2 model multiplies with the tool."""
