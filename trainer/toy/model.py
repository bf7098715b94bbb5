"""The tiny Qwen2 policy: about 110K parameters, randomly initialised."""

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from trainer.toy.tokenizer import PIECES


def toy_config() -> Qwen2Config:
    """Hidden 64, 2 layers, 4 heads, MLP 192, tied embeddings (the size that learned here)."""
    return Qwen2Config(
        vocab_size=len(PIECES),
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=PIECES.index("<pad>"),
        eos_token_id=PIECES.index("<|im_end|>"),
        bos_token_id=None,
    )


def build_model(seed: int) -> Qwen2ForCausalLM:
    """A fresh toy model, initialised from ``seed``."""
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(toy_config())
