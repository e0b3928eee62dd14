"""A byte-level tokenizer.json without merges, one token per byte and <|endoftext|> after them
(ids 0-255 and 256), so that a text's tokens are its bytes whoever encodes it: what the interop
tests' random models are saved with for `kiln eval --hf` and `kiln sample --hf`."""
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers


def byte_chars():
    """GPT-2's map from a byte to the character that stands for it in a byte-level vocabulary."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


def save_byte_tokenizer(path):
    tokenizer = Tokenizer(models.BPE(vocab={c: b for b, c in byte_chars().items()}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    tokenizer.save(path)
