"""Running chunk encoding in this process or in a process pool, results always in input order."""

from __future__ import annotations

import collections
import multiprocessing
from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer

from pile.encode import Chunk, ChunkResult, Encoder, EncodeSettings, encode_in_worker, init_worker, single_threaded


class SerialRunner:
    """Encodes in the calling process, on one thread (``--workers 1``), with ``tokenizer`` when given."""

    def __init__(self, settings: EncodeSettings, tokenizer: Tokenizer | None = None):
        single_threaded()
        self._encoder = Encoder(settings, tokenizer)

    def map(self, chunks: Iterable[Chunk]) -> Iterator[ChunkResult]:
        for chunk in chunks:
            yield self._encoder.encode(chunk)

    def close(self) -> None:
        pass


class PoolRunner:
    """Encodes in ``workers`` spawned processes with at most ``2 * workers`` chunks in flight (bounded memory).

    When reading ``chunks`` raises, the chunks already submitted are still yielded, then the error is raised:
    what was read before a truncation is kept, whatever the scheduling.
    """

    def __init__(self, settings: EncodeSettings, workers: int):
        context = multiprocessing.get_context("spawn")  # no fork after tokenizers' threads have started
        self._pool = context.Pool(workers, initializer=init_worker, initargs=(settings,))
        self._max_in_flight = 2 * workers

    def map(self, chunks: Iterable[Chunk]) -> Iterator[ChunkResult]:
        pending: collections.deque = collections.deque()
        iterator = iter(chunks)
        error: BaseException | None = None
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                break
            except Exception as e:
                error = e
                break
            pending.append(self._pool.apply_async(encode_in_worker, (chunk,)))
            if len(pending) >= self._max_in_flight:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
        if error is not None:
            raise error

    def close(self) -> None:
        self._pool.close()
        self._pool.join()


def make_runner(
    settings: EncodeSettings, workers: int, tokenizer: Tokenizer | None = None
) -> SerialRunner | PoolRunner:
    """A pool for more than one worker, else the serial runner (which reuses ``tokenizer``, when given)."""
    return PoolRunner(settings, workers) if workers > 1 else SerialRunner(settings, tokenizer)
