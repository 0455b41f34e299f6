"""Compression of everything piflow sends through Temporal, and the size a value takes there.

Temporal refuses a payload (an argument, a result, a query answer, the state a run carries when it
continues as new) past 2 MB, and its gRPC message gzip does not help: the limit applies to the
payload itself. Journals and agent outputs are text, which zlib shrinks several times, so every
client and worker (`settings.connect`) encodes payloads with `ZlibCodec`. A compressed payload says
so in its `encoding` metadata; any other payload passes decoding untouched, so a run started before
the codec existed (or by a client without it) keeps working.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from piflow.engine.temporal.wire import (
    COMPRESS_FROM,
    PAYLOAD_LIMIT,
    VALUE_LIMIT,
    megabytes,
    wire_size,
)
from piflow.errors import WorkflowError

ENCODING = b"binary/zlib"
"""The `encoding` metadata of a payload this codec compressed (the serialized original payload)."""
DECODED_LIMIT = 256 * 1024 * 1024
"""A compressed payload never inflates past this (a corrupt or hostile payload cannot exhaust memory)."""


class ZlibCodec(PayloadCodec):
    """zlib-compress payloads of COMPRESS_FROM bytes or more when that makes them smaller."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [compress(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [decompress(payload) for payload in payloads]


def compress(payload: Payload) -> Payload:
    raw = payload.SerializeToString()
    if len(raw) < COMPRESS_FROM:
        return payload
    packed = zlib.compress(raw, 6)
    if len(packed) >= len(raw):
        return payload
    return Payload(metadata={"encoding": ENCODING}, data=packed)


def decompress(payload: Payload) -> Payload:
    if payload.metadata.get("encoding") != ENCODING:
        return payload  # written before the codec, or by a client without it
    inflater = zlib.decompressobj()
    raw = inflater.decompress(payload.data, DECODED_LIMIT)
    if inflater.unconsumed_tail:
        raise ValueError(f"a compressed Temporal payload inflates past {DECODED_LIMIT} bytes")
    decoded = Payload()
    decoded.ParseFromString(raw)
    return decoded


DATA_CONVERTER = dataclasses.replace(DataConverter.default, payload_codec=ZlibCodec())
"""The data converter of every piflow client and worker: Temporal's JSON, compressed."""


def check_agent_size(value: Any, what: str) -> None:
    """RPC_LIMIT_EXCEEDED, saying what is too big (`what`: "the output of agent x"), its size and the
    limit, when one agent's input or output alone is more than a run on Temporal can carry, instead
    of the server refusing the workflow's payloads (a workflow task failing over and over)."""
    size = wire_size(value)
    if size > VALUE_LIMIT:
        raise WorkflowError("RPC_LIMIT_EXCEEDED", (
            f"{what} takes {megabytes(size)} compressed, more than the {megabytes(VALUE_LIMIT)} one agent's "
            f"prompt or output may take in a run on Temporal (whose payloads stop at {megabytes(PAYLOAD_LIMIT)}); "
            "have agents write large results to files and pass their paths, or run the script on the embedded "
            "executor"))
