"""ZooKeeper's read-only multi (``multiRead``, op code 22, ZooKeeper 3.6+) for kazoo.

kazoo 2.11 has no API for it, but it sends any request object that has a ``type``, a
``serialize()`` and a ``deserialize(buffer, offset)`` (``KazooClient._call``), so
``MultiGetData`` is such an object: many ``getData`` operations in one request, answered
in one response with a result per operation, in order.

Wire format (ZooKeeper's jute ``MultiOperationRecord`` / ``MultiResponse``): the request
is, for each operation, a header ``(type: int, done: bool, err: int)`` = ``(4, false,
-1)`` and a ``GetDataRequest`` ``(path: string, watch: bool)``, then the end header
``(-1, true, -1)``. The response is, for each operation, a header ``(type, false, err)``
and either a ``GetDataResponse`` ``(data: buffer, stat)`` when ``type`` is 4 or an
``ErrorResponse`` ``(err: int)`` when ``type`` is -1, then the end header. Unlike a
write multi (a transaction), the reads are independent: one failing (a znode deleted
since it was listed: NoNode) does not fail the others, and the server applies each
operation's ACL.

A server older than 3.6 does not know the op code and answers the whole request with
``UnimplementedError`` (-6); the caller falls back to single reads
(``services/zk/store.py`` ``MetadataStore.get_many``).

The answer is not bounded by the server: its size is the sum of the znodes read, so
callers bound the operations per request (``services/zk/limits.py``
``MULTI_READ_OPS_MAX``) with the size of the znodes they read in mind.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, TypeAlias

from kazoo.exceptions import EXCEPTIONS, KazooException
from kazoo.protocol.states import ZnodeStat

MULTI_READ = 22  # ZooDefs.OpCode.multiRead
GET_DATA = 4  # ZooDefs.OpCode.getData
ERROR = -1  # ZooDefs.OpCode.error: an operation's result is an error code

_header = struct.Struct("!iBi")  # type, done, err
_int = struct.Struct("!i")
_stat = struct.Struct("!qqqqiiiqiiq")  # ZooKeeper's Stat, as kazoo's ZnodeStat
_get_data_header = _header.pack(GET_DATA, 0, -1)
_end = _header.pack(-1, 1, -1)

# One operation's result: the znode's data and stat, or the error ZooKeeper answered
# for it (kazoo's exception class for the code, e.g. ``NoNodeError``).
GetDataResult: TypeAlias = "tuple[bytes, ZnodeStat] | KazooException"


class MultiGetData:
    """A ``multiRead`` request of ``getData`` on ``paths`` (full server paths: the
    client's chroot already prefixed), without watches."""

    type: ClassVar[int] = MULTI_READ

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __repr__(self) -> str:  # kazoo logs requests at debug level
        return f"MultiGetData({len(self.paths)} paths)"

    def serialize(self) -> bytes:
        parts: list[bytes] = []
        for path in self.paths:
            encoded = path.encode()
            parts += (_get_data_header, _int.pack(len(encoded)), encoded, b"\x00")
        parts.append(_end)
        return b"".join(parts)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[GetDataResult]:
        results: list[GetDataResult] = []
        while True:
            op, done, err = _header.unpack_from(buffer, offset)
            offset += _header.size
            if done:
                return results
            if op == GET_DATA:
                length = _int.unpack_from(buffer, offset)[0]
                offset += _int.size
                data = b""
                if length > 0:
                    data = bytes(buffer[offset : offset + length])
                    offset += length
                results.append((data, ZnodeStat._make(_stat.unpack_from(buffer, offset))))
                offset += _stat.size
            elif op == ERROR:
                code = _int.unpack_from(buffer, offset)[0]
                offset += _int.size
                exception: Any = EXCEPTIONS[code]
                results.append(exception())
            else:
                raise ValueError(f"multiRead answered an operation of type {op}")
