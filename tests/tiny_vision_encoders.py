"""Tiny random vision-language encoders built offline for the visual retriever tests.

Each builder makes the real transformers classes with a few layers and a hidden size of 32-64,
a byte-level tokenizer holding the special tokens the processors need, and saves model and
processor with save_pretrained, so a test loads them through the retriever's own loading code
(the same code that loads MrLight/dse-qwen2-2b-mrl-v1 or vidore/colqwen2-v1.0-hf).
torch and transformers are imported inside the builders: every xdist worker collects every test
file (tests/conftest.py refuses a collection that imports them).
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import pre_tokenizers

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
TEXT_HIDDEN = 64
VISION_EMBED = 32
MIN_PIXELS = 28 * 28
MAX_PIXELS = 16 * 28 * 28  # pages become at most 16 merged image tokens: quick on a CPU


def _qwen_tokenizer():  # -> Qwen2Tokenizer
    """A byte-level BPE with no merges (one token a byte) and Qwen's special tokens first."""
    from transformers import Qwen2Tokenizer

    vocab = {tok: i for i, tok in enumerate(QWEN_SPECIALS)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(ch, len(vocab))
    tok = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token="<|endoftext|>", eos_token="<|im_end|>",
                         pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": QWEN_SPECIALS[1:]})
    return tok


def _qwen2_vl_config(vocab_size: int, tok) -> object:  # noqa: ANN001
    from transformers import Qwen2VLConfig

    head_dim = TEXT_HIDDEN // 2
    return Qwen2VLConfig(
        text_config={"vocab_size": vocab_size, "hidden_size": TEXT_HIDDEN, "intermediate_size": 96,
                     "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
                     "max_position_embeddings": 4096,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                         "mrope_section": [head_dim // 4, head_dim // 8, head_dim // 8]},
                     "bos_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
                     "eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"),
                     "pad_token_id": tok.convert_tokens_to_ids("<|endoftext|>")},
        vision_config={"depth": 1, "embed_dim": VISION_EMBED, "hidden_size": TEXT_HIDDEN, "num_heads": 2,
                       "mlp_ratio": 2, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"),
    )


def _image_processor():  # -> Qwen2VLImageProcessorPil
    """The PIL image processor: torchvision (the default backend's need) is not a dependency."""
    from transformers import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)


def write_tiny_dse(folder: Path, seed: int = 0) -> Path:
    """A DSE-shaped model: Qwen2VLForConditionalGeneration, its tokenizer and image processor (as
    the hub folder has them; Qwen2VLProcessor itself needs torchvision's video processor)."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(seed)
    tok = _qwen_tokenizer()
    model = Qwen2VLForConditionalGeneration(_qwen2_vl_config(len(tok), tok)).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    _image_processor().save_pretrained(folder)
    return folder


def write_tiny_colqwen2(folder: Path, seed: int = 0) -> Path:
    """A ColQwen2 (transformers' ColQwen2ForRetrieval, as vidore/colqwen2-v1.0-hf) and its processor."""
    import torch
    from transformers import ColQwen2Config, ColQwen2ForRetrieval, ColQwen2Processor

    torch.manual_seed(seed)
    tok = _qwen_tokenizer()
    config = ColQwen2Config(vlm_config=_qwen2_vl_config(len(tok), tok), embedding_dim=16)
    ColQwen2ForRetrieval(config).eval().save_pretrained(folder)
    ColQwen2Processor(image_processor=_image_processor(), tokenizer=tok).save_pretrained(folder)
    return folder


def _gemma_tokenizer():  # -> GemmaTokenizer
    """Gemma's byte-fallback BPE with a small vocabulary: specials, the 256 byte tokens, the word
    boundary and the printable ASCII characters (no merges: one token a character)."""
    from transformers import GemmaTokenizer

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"])}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for ch in ["\u2581", *(chr(c) for c in range(33, 127))]:
        vocab.setdefault(ch, len(vocab))
    return GemmaTokenizer(vocab=vocab, merges=[])


def write_tiny_colpali(folder: Path, seed: int = 0) -> Path:
    """A ColPali (transformers' ColPaliForRetrieval over a PaliGemma, as vidore/colpali-v1.3-hf):
    a 1-layer SigLIP of 56x56 images (16 image tokens), a 2-layer Gemma, and its processor."""
    import torch
    from transformers import ColPaliConfig, ColPaliForRetrieval, ColPaliProcessor, PaliGemmaConfig
    from transformers import SiglipImageProcessorPil as SiglipImageProcessor

    torch.manual_seed(seed)
    tok = _gemma_tokenizer()
    image_processor = SiglipImageProcessor(size={"height": 56, "width": 56}, image_mean=[0.5] * 3,
                                           image_std=[0.5] * 3)
    image_processor.image_seq_length = 16
    processor = ColPaliProcessor(image_processor=image_processor, tokenizer=tok)  # adds <image> and loc tokens
    vlm = PaliGemmaConfig(
        text_config={"model_type": "gemma", "vocab_size": len(processor.tokenizer), "hidden_size": TEXT_HIDDEN,
                     "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "num_key_value_heads": 1, "head_dim": 32, "max_position_embeddings": 512,
                     "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2},
        vision_config={"model_type": "siglip_vision_model", "hidden_size": VISION_EMBED, "intermediate_size": 64,
                       "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 56, "patch_size": 14,
                       "projection_dim": TEXT_HIDDEN},
        image_token_id=processor.image_token_id, projection_dim=TEXT_HIDDEN, hidden_size=TEXT_HIDDEN,
    )
    ColPaliForRetrieval(ColPaliConfig(vlm_config=vlm, embedding_dim=16)).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
