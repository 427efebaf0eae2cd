"""Read the typeshed stubs vendored inside the ty binary.

ty reports locations in its bundled typeshed as ``stdlib/<module>.pyi``; to show
context lines around them we need their text.  The binary embeds them as a zip
archive (members compressed with zstd in ty 0.0.99).  We locate the archive by
its end-of-central-directory record and decompress members on demand with the
``zstandard`` package.  When a file cannot be read, lookups return None and the
caller keeps ty's snippets without extra context.
"""

from __future__ import annotations

import io
import struct
import threading
import zipfile
import zlib

import zstandard

__all__ = ['VendoredTypeshed']

_EOCD = b'PK\x05\x06'
_LOCAL_HEADER = b'PK\x03\x04'
_ZSTD_METHOD = 93


def _find_archive(data: bytes) -> zipfile.ZipFile | None:
    pos = len(data)
    while True:
        pos = data.rfind(_EOCD, 0, pos)
        if pos < 0:
            return None
        if pos + 22 <= len(data):
            cd_size, cd_offset, comment_len = struct.unpack('<IIH', data[pos + 12 : pos + 22])
            start = pos - cd_size - cd_offset
            if start >= 0 and data[start : start + 4] == _LOCAL_HEADER:
                try:
                    archive = zipfile.ZipFile(io.BytesIO(data[start : pos + 22 + comment_len]))
                    archive.getinfo('stdlib/builtins.pyi')
                except (zipfile.BadZipFile, KeyError, ValueError, OSError):
                    pass
                else:
                    return archive
        pos -= 1
        if pos <= 0:
            return None


def _zstd_decompress(raw: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompress(raw, max_output_size=64 << 20)


class VendoredTypeshed:
    """Lazy, thread-safe access to the typeshed files inside one ty binary."""

    def __init__(self, ty_bin: str) -> None:
        self._ty_bin = ty_bin
        self._lock = threading.Lock()
        self._archive: zipfile.ZipFile | None = None
        self._loaded = False
        self._cache: dict[str, str | None] = {}

    def _open(self) -> zipfile.ZipFile | None:
        if not self._loaded:
            self._loaded = True
            try:
                with open(self._ty_bin, 'rb') as f:
                    data = f.read()
                self._archive = _find_archive(data)
            except OSError:
                self._archive = None
        return self._archive

    def read(self, path: str) -> str | None:
        """Text of a vendored file such as ``stdlib/builtins.pyi`` (or None)."""
        with self._lock:
            if path in self._cache:
                return self._cache[path]
            text = None
            try:
                text = self._read(path)
            except Exception:
                text = None
            self._cache[path] = text
            return text

    def _read(self, path: str) -> str | None:
        archive = self._open()
        if archive is None:
            return None
        try:
            info = archive.getinfo(path)
        except KeyError:
            return None
        if info.compress_type != _ZSTD_METHOD:
            return archive.read(info).decode('utf-8')
        buf = archive.fp
        assert buf is not None
        buf.seek(info.header_offset)
        header = buf.read(30)
        if header[:4] != _LOCAL_HEADER:
            return None
        name_len, extra_len = struct.unpack('<HH', header[26:30])
        buf.seek(info.header_offset + 30 + name_len + extra_len)
        raw = buf.read(info.compress_size)
        data = _zstd_decompress(raw)
        if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            return None
        return data.decode('utf-8')
