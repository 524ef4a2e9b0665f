"""A small Thrift compact-protocol tree codec for tests: decode a struct into plain Python values,
replace or delete one field at a path, encode it back.

Written from the compact protocol spec alone, sharing no code with qdbpm (whose Thrift readers are
what the tests check). A struct is a list of [field id, wire type, value]; a list or set is
(element type, [values]); a map (key type, value type, [(key, value)]); a bool is a Python bool
(wire type TRUE whatever nibble carried it). Encoding is canonical (short headers wherever they
fit), which is how every Parquet writer we read writes: `encode(decode(b)) == b` is checked by
the tests before they trust an edit.
"""

import struct as _struct

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
NAMES = {TRUE: "bool", FALSE: "bool", BYTE: "byte", I16: "i16", I32: "i32", I64: "i64", DOUBLE: "double",
         BINARY: "binary", LIST: "list", SET: "set", MAP: "map", STRUCT: "struct"}
DELETE = object()


def _varint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _unzigzag(u):
    return (u >> 1) ^ -(u & 1)


def _value(buf, pos, t, in_coll):
    if t in (TRUE, FALSE):
        if in_coll:
            return buf[pos] == TRUE, pos + 1
        return t == TRUE, pos
    if t == BYTE:
        return _struct.unpack_from("b", buf, pos)[0], pos + 1
    if t in (I16, I32, I64):
        u, pos = _varint(buf, pos)
        return _unzigzag(u), pos
    if t == DOUBLE:
        return _struct.unpack_from("<d", buf, pos)[0], pos + 8
    if t == BINARY:
        n, pos = _varint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if t in (LIST, SET):
        size, et = buf[pos] >> 4, buf[pos] & 0x0F
        pos += 1
        if size == 15:
            size, pos = _varint(buf, pos)
        out = []
        for _ in range(size):
            v, pos = _value(buf, pos, et, True)
            out.append(v)
        return (TRUE if et == FALSE else et, out), pos
    if t == MAP:
        size, pos = _varint(buf, pos)
        if not size:
            return (0, 0, []), pos
        kt, vt = buf[pos] >> 4, buf[pos] & 0x0F
        pos += 1
        items = []
        for _ in range(size):
            k, pos = _value(buf, pos, kt, True)
            v, pos = _value(buf, pos, vt, True)
            items.append((k, v))
        return (kt, vt, items), pos
    if t == STRUCT:
        return decode(buf, pos)
    raise ValueError(f"type {t}")


def decode(buf, pos=0):
    """(struct, end position) of the compact struct at buf[pos:]."""
    fields, last = [], 0
    while True:
        b = buf[pos]
        pos += 1
        if b == STOP:
            return fields, pos
        t, delta = b & 0x0F, b >> 4
        if delta:
            fid = last + delta
        else:
            u, pos = _varint(buf, pos)
            fid = _unzigzag(u)
        v, pos = _value(buf, pos, t, False)
        fields.append([fid, TRUE if t == FALSE else t, v])
        last = fid


def _put_varint(out, n):
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(v):
    return ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)


def _put_value(out, t, v, in_coll):
    if t in (TRUE, FALSE):
        if in_coll:
            out.append(TRUE if v else FALSE)
    elif t == BYTE:
        out += _struct.pack("b", v)
    elif t in (I16, I32, I64):
        _put_varint(out, _zigzag(v))
    elif t == DOUBLE:
        out += _struct.pack("<d", v)
    elif t == BINARY:
        _put_varint(out, len(v))
        out += v
    elif t in (LIST, SET):
        et, values = v
        if len(values) < 15:
            out.append(len(values) << 4 | et)
        else:
            out.append(0xF0 | et)
            _put_varint(out, len(values))
        for x in values:
            _put_value(out, et, x, True)
    elif t == MAP:
        kt, vt, items = v
        _put_varint(out, len(items))
        if items:
            out.append(kt << 4 | vt)
            for k, x in items:
                _put_value(out, kt, k, True)
                _put_value(out, vt, x, True)
    elif t == STRUCT:
        _put_struct(out, v)
    else:
        raise ValueError(f"type {t}")


def _put_struct(out, fields):
    last = 0
    for fid, t, v in fields:
        if t in (TRUE, FALSE):
            t = TRUE if v else FALSE
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | t)
        else:
            out.append(t)
            _put_varint(out, _zigzag(fid))
        _put_value(out, t, v, False)
        last = fid
    out.append(STOP)


def encode(fields) -> bytes:
    out = bytearray()
    _put_struct(out, fields)
    return bytes(out)


def field(fields, fid):
    """The [id, type, value] entry of `fid` in a decoded struct, or None."""
    return next((f for f in fields if f[0] == fid), None)


def walk(fields, path):
    """The struct at `path` (field ids into structs, indices into lists) of a decoded struct."""
    cur = fields
    for step in path:
        cur = cur[1][step] if isinstance(cur, tuple) else field(cur, step)[2]
    return cur


def rewrite(meta: bytes, path, fid, new) -> bytes:
    """`meta` with field `fid` of the struct at `path` set to `new` ((wire type, value)), inserted
    in id order when absent, or removed when `new` is DELETE."""
    root, _ = decode(meta)
    target = walk(root, path)
    at = next((i for i, f in enumerate(target) if f[0] == fid), None)
    if new is DELETE:
        if at is not None:
            del target[at]
    elif at is not None:
        target[at] = [fid, new[0], new[1]]
    else:
        at = next((i for i, f in enumerate(target) if f[0] > fid), len(target))
        target.insert(at, [fid, new[0], new[1]])
    return encode(root)
