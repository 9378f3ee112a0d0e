"""Client for camdnnd's socket protocol (versions 1, 2 and 3), standard library only.

Wire format: docs/protocol.md. Every message is a 12-byte little-endian header
(magic b"CDNN", u16 version, u8 type, u8 flags, u32 body length) and a body.
Server messages are returned as plain dicts; see `decode_server`.
"""

import collections
import socket
import struct
import time

MAGIC = b"CDNN"
HEADER = struct.Struct("<4sHBBI")
HEADER_LEN = HEADER.size  # 12
PROTOCOL_VERSION = 3
SUPPORTED_VERSIONS = (1, 2, 3)
HANDSHAKE_VERSION = 1
DEFAULT_MAX_MESSAGE_SIZE = 32 * 1024 * 1024

# Message type bytes.
HELLO, FRAME, BYE = 0x01, 0x02, 0x03
WELCOME, RESULT, DROPPED, REJECTED, ERROR = 0x81, 0x82, 0x83, 0x84, 0x85

# Frame header flags.
FLAG_PRIORITY, FLAG_DEADLINE, FLAG_DEADLINE_ABSOLUTE, FLAG_DETECTIONS = 0x01, 0x02, 0x04, 0x08
# Error header flag: the server closes the connection after this message.
FLAG_ERROR_CLOSING = 0x01

PIXEL_FORMATS = {"rgb24": 1, "bgr24": 2, "nv12": 3, "jpeg": 4}
DROP_REASONS = {1: "superseded", 2: "deadline_passed", 3: "overloaded", 4: "shutting_down",
                5: "window_exceeded", 6: "processing_failed"}
REJECT_REASONS = {1: "malformed", 2: "bad_dimensions", 3: "payload_size_mismatch",
                  4: "bad_detection", 5: "unsupported_format", 6: "seq_not_increasing",
                  7: "too_large"}
ERROR_CODES = {1: "bad_magic", 2: "unsupported_version", 3: "unknown_message_type",
               4: "message_too_large", 5: "malformed", 6: "handshake_required",
               7: "unexpected_message", 8: "internal", 9: "shutting_down",
               10: "connection_limit", 11: "timeout"}
# The first protocol version that defines each error code (the rest: version 1).
ERROR_CODE_SINCE = {10: 2, 11: 2}


def jpeg_size(data):
    """(width, height) from a JPEG file's start-of-frame header, the size `send_frame` must
    state for it. Raises ValueError when `data` is not a JPEG or has no such header."""
    if data[:2] != b"\xff\xd8":
        raise ValueError("not a JPEG file (no SOI marker)")
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            raise ValueError("corrupt JPEG: expected a marker at byte %d" % i)
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        length = struct.unpack_from(">H", data, i + 2)[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(data):
                break
            height, width = struct.unpack_from(">HH", data, i + 5)
            return width, height
        i += 2 + length
    raise ValueError("JPEG has no start-of-frame header")


class ProtocolError(Exception):
    """Bytes from the server that are not a valid message, or a refused handshake (then `code`
    is the server's error code, e.g. "connection_limit")."""

    code = None


def _message(kind, flags, body, version=PROTOCOL_VERSION):
    return HEADER.pack(MAGIC, version, kind, flags, len(body)) + body


def _str(s):
    raw = s.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError("string longer than 65535 bytes")
    return struct.pack("<H", len(raw)) + raw


def _class(c):
    if isinstance(c, int):
        return struct.pack("<BI", 0, c)
    return b"\x01" + _str(c)


def payload_len(pixel_format, width, height):
    """Exact payload length for raw formats, None for JPEG."""
    if pixel_format in ("rgb24", "bgr24"):
        return width * height * 3
    if pixel_format == "nv12":
        return width * height * 3 // 2
    return None


def encode_hello(client_name, versions=SUPPORTED_VERSIONS):
    """Hello: offers `versions` and names the client."""
    if not 1 <= len(versions) <= 255:
        raise ValueError("offer 1 to 255 versions")
    body = struct.pack("<B", len(versions)) + b"".join(struct.pack("<H", v) for v in versions)
    return _message(HELLO, 0, body + _str(client_name), HANDSHAKE_VERSION)


def encode_frame(stream_id, seq, capture_ts_us, width, height, pixel_format, payload,
                 priority=None, deadline_us=None, deadline_absolute=False, detections=None,
                 version=PROTOCOL_VERSION):
    """Frame. `pixel_format` is "rgb24", "bgr24", "nv12" or "jpeg". `deadline_us` is relative
    (µs after the server has read the frame) unless `deadline_absolute` (µs since the Unix epoch).
    `detections`, when given (even empty), is a list of dicts with "bbox" (x0, y0, x1, y1),
    "class" (int id: the detector's label index, or str name) and "score" in [0, 1]; the server
    then skips its detector. `version` is the one the handshake chose (same layout in 1 and 2)."""
    if width < 1 or height < 1:
        raise ValueError("width and height must be at least 1")
    if pixel_format == "nv12" and (width % 2 or height % 2):
        raise ValueError("NV12 needs even width and height")
    expected = payload_len(pixel_format, width, height)
    if expected is not None and expected != len(payload):
        raise ValueError("%s %dx%d needs %d payload bytes, got %d"
                         % (pixel_format, width, height, expected, len(payload)))
    if expected is None and not payload:
        raise ValueError("empty JPEG payload")
    flags = 0
    body = struct.pack("<IQQIIB", stream_id, seq, capture_ts_us, width, height,
                       PIXEL_FORMATS[pixel_format])
    if priority is not None:
        flags |= FLAG_PRIORITY
        body += struct.pack("<B", priority)
    if deadline_us is not None:
        flags |= FLAG_DEADLINE | (FLAG_DEADLINE_ABSOLUTE if deadline_absolute else 0)
        body += struct.pack("<Q", deadline_us)
    if detections is not None:
        flags |= FLAG_DETECTIONS
        body += struct.pack("<H", len(detections))
        for d in detections:
            x0, y0, x1, y1 = d["bbox"]
            if not (x0 <= x1 and y0 <= y1 and 0.0 <= d["score"] <= 1.0):
                raise ValueError("detection needs x0 <= x1, y0 <= y1 and a score in [0, 1]")
            body += struct.pack("<fffff", x0, y0, x1, y1, d["score"]) + _class(d["class"])
    body += struct.pack("<I", len(payload)) + bytes(payload)
    return _message(FRAME, flags, body, version)


def encode_bye(version=PROTOCOL_VERSION):
    """Bye: the client sends nothing more; the server answers what is in flight, then closes."""
    return _message(BYE, 0, b"", version)


class _Reader:
    def __init__(self, body):
        self.body, self.pos = body, 0

    def take(self, n, field):
        if self.pos + n > len(self.body):
            raise ProtocolError("field `%s` needs %d bytes, %d remain"
                                % (field, n, len(self.body) - self.pos))
        out = self.body[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt, field):
        s = struct.Struct("<" + fmt)
        vals = s.unpack(self.take(s.size, field))
        return vals[0] if len(vals) == 1 else vals

    def str(self, field):
        raw = self.take(self.unpack("H", field), field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("field `%s` is not valid UTF-8" % field) from None

    def cls(self):
        kind = self.unpack("B", "class_kind")
        if kind == 0:
            return self.unpack("I", "class_id")
        if kind == 1:
            return self.str("class_name")
        raise ProtocolError("class_kind %d unknown" % kind)

    def code(self, fmt, table, field):
        v = self.unpack(fmt, field)
        if v not in table:
            raise ProtocolError("field `%s` has unknown value %d" % (field, v))
        return table[v]

    def finish(self):
        if self.pos != len(self.body):
            raise ProtocolError("%d trailing bytes in body" % (len(self.body) - self.pos))


def _outputs(r, version):
    outputs = []
    for _ in range(r.unpack("B", "n_outputs")):
        model = r.str("model")
        # Version 3 on: frames since the result was inferred (0: on this frame).
        age = {"age": r.unpack("I", "output_age")} if version >= 3 else {}
        kind = r.unpack("B", "output_kind")
        if kind == 0:
            topk = [(r.str("label"), r.unpack("f", "label_score"))
                    for _ in range(r.unpack("B", "n_labels"))]
            outputs.append({"model": model, "topk": topk, **age})
        elif kind == 1:
            tensors = []
            for _ in range(r.unpack("B", "n_tensors")):
                name = r.str("tensor_name")
                dims = [r.unpack("I", "dims") for _ in range(r.unpack("B", "n_dims"))]
                count = 1
                for d in dims:
                    count *= d
                raw = r.take(4 * count, "tensor_data")
                tensors.append({"name": name, "dims": dims,
                                "data": list(struct.unpack("<%df" % count, raw))})
            outputs.append({"model": model, "tensors": tensors, **age})
        else:
            raise ProtocolError("output_kind %d unknown" % kind)
    return outputs


def _decode_body(kind, flags, body, version):
    r = _Reader(body)
    if kind == WELCOME:
        version, max_size, window = r.unpack("HIH", "welcome")
        msg = {"type": "welcome", "version": version, "max_message_size": max_size,
               "window": window, "server_name": r.str("server_name")}
    elif kind == RESULT:
        stream_id, seq, q, d, c, t = r.unpack("IQIIII", "result header")
        objects = []
        for _ in range(r.unpack("H", "n_objects")):
            x0, y0, x1, y1, score = r.unpack("fffff", "object box")
            obj = {"bbox": (x0, y0, x1, y1), "score": score, "class": r.cls()}
            if version >= 3:
                # The object's track (0: not tracked) and the frames since the detector
                # last saw its box.
                obj["track_id"], obj["box_age"] = r.unpack("II", "track")
            obj["outputs"] = _outputs(r, version)
            objects.append(obj)
        # Version 2 on: objects over the server's per-frame cap, counted but not listed.
        dropped = r.unpack("I", "objects_dropped") if version >= 2 else 0
        msg = {"type": "result", "stream_id": stream_id, "seq": seq,
               "timing": {"queue_us": q, "detect_us": d, "classify_us": c, "total_us": t},
               "objects": objects, "objects_dropped": dropped}
    elif kind == DROPPED:
        stream_id, seq = r.unpack("IQ", "frame id")
        msg = {"type": "dropped", "stream_id": stream_id, "seq": seq,
               "reason": r.code("B", DROP_REASONS, "drop_reason")}
    elif kind == REJECTED:
        stream_id, seq = r.unpack("IQ", "frame id")
        msg = {"type": "rejected", "stream_id": stream_id, "seq": seq,
               "reason": r.code("B", REJECT_REASONS, "reject_reason"),
               "message": r.str("message")}
    elif kind == ERROR:
        codes = {k: v for k, v in ERROR_CODES.items() if ERROR_CODE_SINCE.get(k, 1) <= version}
        msg = {"type": "error", "code": r.code("H", codes, "error_code"),
               "closing": bool(flags & FLAG_ERROR_CLOSING), "message": r.str("message")}
    else:
        raise ProtocolError("message type 0x%02x is not a server message" % kind)
    r.finish()
    return msg


def decode_server(buf, max_message_size=DEFAULT_MAX_MESSAGE_SIZE):
    """Decodes the first server message in `buf`: returns (dict, bytes used), or None when more
    bytes are needed. Raises ProtocolError naming what is wrong."""
    if len(buf) < HEADER_LEN:
        if bytes(buf[:4]) != MAGIC[:len(buf[:4])]:
            raise ProtocolError("bad magic %r" % bytes(buf[:4]))
        return None
    magic, version, kind, flags, body_len = HEADER.unpack_from(buf)
    if magic != MAGIC:
        raise ProtocolError("bad magic %r" % magic)
    if version not in SUPPORTED_VERSIONS:
        raise ProtocolError("unsupported protocol version %d" % version)
    allowed = FLAG_ERROR_CLOSING if kind == ERROR else 0
    if flags & ~allowed:
        raise ProtocolError("invalid flags 0x%02x for type 0x%02x" % (flags, kind))
    if body_len > max_message_size:
        raise ProtocolError("body of %d bytes exceeds the maximum of %d" % (body_len, max_message_size))
    if len(buf) < HEADER_LEN + body_len:
        return None
    body = bytes(buf[HEADER_LEN:HEADER_LEN + body_len])
    return _decode_body(kind, flags, body, version), HEADER_LEN + body_len


class Client:
    """Blocking client over camdnnd's Unix socket. Frames are pipelined: `send_frame` waits only
    when the stream already has `window` frames in flight (keeping answers for `recv`)."""

    def __init__(self, path, client_name="python", timeout=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self._buf = bytearray()
        self._pending = collections.deque()
        self._in_flight = collections.defaultdict(set)
        self.sock.sendall(encode_hello(client_name))
        first = self._read()
        if first["type"] == "error":
            self.sock.close()
            err = ProtocolError("server refused the handshake: %s: %s"
                                % (first["code"], first["message"]))
            err.code = first["code"]
            raise err
        if first["type"] != "welcome" or first["version"] not in SUPPORTED_VERSIONS:
            self.sock.close()
            raise ProtocolError("bad handshake answer %r" % (first,))
        self.welcome = first

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def in_flight(self, stream_id):
        """Frames of `stream_id` sent and not yet answered."""
        return len(self._in_flight[stream_id])

    def in_flight_frames(self):
        """Every (stream_id, seq) sent and not yet answered, sorted."""
        return sorted((s, q) for s, seqs in self._in_flight.items() for q in seqs)

    def send_frame(self, stream_id, seq, capture_ts_us, width, height, pixel_format, payload, **opts):
        """Sends one frame (arguments as for `encode_frame`)."""
        if seq in self._in_flight[stream_id]:
            raise ValueError("stream %d seq %d is already in flight" % (stream_id, seq))
        msg = encode_frame(stream_id, seq, capture_ts_us, width, height, pixel_format, payload,
                           version=self.welcome["version"], **opts)
        if len(msg) - HEADER_LEN > self.welcome["max_message_size"]:
            raise ValueError("frame exceeds the server's max_message_size")
        while self.in_flight(stream_id) >= self.welcome["window"]:
            self._pending.append(self._answer())
        self.sock.sendall(msg)
        self._in_flight[stream_id].add(seq)

    def recv(self):
        """Next answer dict ("result", "dropped", "rejected" or "error"); blocks.
        Raises EOFError when the server has closed the connection."""
        return self._pending.popleft() if self._pending else self._answer()

    def bye(self):
        """Sends Bye and returns every answer until the server closes the connection."""
        self.sock.sendall(encode_bye(self.welcome["version"]))
        answers = list(self._pending)
        self._pending.clear()
        while True:
            try:
                answers.append(self._answer())
            except EOFError:
                self.close()
                return answers

    def close(self):
        self.sock.close()

    def _answer(self):
        msg = self._read()
        if msg["type"] in ("result", "dropped", "rejected"):
            seqs = self._in_flight[msg["stream_id"]]
            if msg["seq"] not in seqs:
                raise ProtocolError("answer for stream %d seq %d, which is not in flight"
                                    % (msg["stream_id"], msg["seq"]))
            seqs.discard(msg["seq"])
        elif msg["type"] != "error":
            raise ProtocolError("unexpected %s" % msg["type"])
        return msg

    def _read(self):
        while True:
            got = decode_server(self._buf)
            if got is not None:
                msg, used = got
                del self._buf[:used]
                return msg
            chunk = self.sock.recv(65536)
            if not chunk:
                if self._buf:
                    raise ProtocolError("server closed the connection mid-message")
                raise EOFError("server closed the connection")
            self._buf += chunk


# Connection failures worth another attempt: the socket is missing or stale while the daemon
# restarts, or the connection broke.
_RETRYABLE = (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError,
              EOFError)


class ReconnectingClient:
    """A `Client` that reconnects with backoff when its connection is lost (the daemon restarted,
    drained, or closed the connection). Opt-in, because answers are per connection: frames in
    flight on the lost connection are never answered by the new one, so `recv` returns them as
    `{"type": "lost", "stream_id", "seq"}` before anything the new connection answers. A frame
    whose send failed is sent again on the new connection. Waits `first` seconds before the
    second attempt, doubling up to `max_wait`, and gives up after `give_up_after` seconds (None:
    never), raising the last error."""

    def __init__(self, path, client_name="python", timeout=None, first=0.1, max_wait=5.0,
                 give_up_after=300.0):
        self._args = (path, client_name, timeout)
        self._backoff = (first, max_wait, give_up_after)
        self._lost = collections.deque()
        self.reconnects = 0
        self._client = self._connect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def welcome(self):
        return self._client.welcome

    def in_flight(self, stream_id):
        """Frames of `stream_id` in flight on the current connection."""
        return self._client.in_flight(stream_id)

    def send_frame(self, *args, **opts):
        """As `Client.send_frame`; reconnects and sends again when the connection is lost."""
        while True:
            try:
                return self._client.send_frame(*args, **opts)
            except socket.timeout:
                raise
            except (OSError, EOFError):
                self._reconnect()

    def recv(self):
        """Next answer: lost frames first, then the server's; reconnects when the connection is
        lost while waiting. Blocks like `Client.recv`."""
        while True:
            if self._lost:
                stream_id, seq = self._lost.popleft()
                return {"type": "lost", "stream_id": stream_id, "seq": seq}
            try:
                msg = self._client.recv()
            except socket.timeout:
                raise
            except (OSError, EOFError):
                self._reconnect()
                continue
            if msg["type"] == "error" and msg["closing"]:
                self._reconnect()
            return msg

    def bye(self):
        """Sends Bye: lost frames, then every answer until the server closes (no reconnection)."""
        lost = [{"type": "lost", "stream_id": s, "seq": q} for s, q in self._lost]
        self._lost.clear()
        return lost + self._client.bye()

    def close(self):
        self._client.close()

    def _reconnect(self):
        self._lost.extend(self._client.in_flight_frames())
        self._client.close()
        self._client = self._connect()
        self.reconnects += 1

    def _connect(self):
        first, max_wait, give_up_after = self._backoff
        start, wait = time.monotonic(), first
        while True:
            try:
                return Client(*self._args)
            except (OSError, EOFError, ProtocolError) as e:
                retry = isinstance(e, _RETRYABLE) or getattr(e, "code", None) in (
                    "connection_limit", "shutting_down")
                late = give_up_after is not None and time.monotonic() - start + wait > give_up_after
                if not retry or late:
                    raise
            time.sleep(wait)
            wait = min(wait * 2, max_wait)
