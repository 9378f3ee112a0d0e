"""Checks the Python codec against the golden vectors in protocol/tests/golden/, which the Rust
tests (protocol/tests/golden.rs) check too, so the two implementations cannot drift.

Run: python3 -m unittest discover -s clients/python   (from the repository root)
"""

import os
import pathlib
import unittest

import camdnn_client as c

GOLDEN = pathlib.Path(os.environ.get(
    "CAMDNN_GOLDEN_DIR",
    pathlib.Path(__file__).resolve().parents[2] / "protocol" / "tests" / "golden"))


def golden(name):
    text = (GOLDEN / (name + ".hex")).read_text()
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


# Same values as protocol/tests/golden.rs. Vectors named NAME_vN are protocol version N, the
# rest version 1.
CLIENT_VECTORS = {
    "hello": lambda: c.encode_hello("cam0", versions=[1]),
    "frame_minimal": lambda: c.encode_frame(7, 42, 1700000000000000, 2, 2, "rgb24", bytes(range(12)),
                                            version=1),
    "frame_full": lambda: c.encode_frame(
        1, 2, 3, 4, 2, "nv12", b"\x80" * 12, priority=200,
        deadline_us=1700000000033000, deadline_absolute=True,
        detections=[{"bbox": (10.0, 20.0, 30.0, 40.0), "class": 3, "score": 0.5},
                    {"bbox": (0.0, 0.0, 1.0, 1.0), "class": "car", "score": 1.0}], version=1),
    "frame_jpeg": lambda: c.encode_frame(9, 0, 5, 640, 480, "jpeg", b"\xff\xd8\xff\xd9",
                                         deadline_us=33000, detections=[], version=1),
    "bye": lambda: c.encode_bye(version=1),
}

SERVER_VECTORS = {
    "welcome": {"type": "welcome", "version": 1, "max_message_size": 33554432, "window": 4,
                "server_name": "camdnnd"},
    "result": {"type": "result", "stream_id": 7, "seq": 42,
               "timing": {"queue_us": 100, "detect_us": 2000, "classify_us": 3000, "total_us": 5500},
               "objects": [{"bbox": (10.0, 20.0, 30.0, 40.0), "score": 0.75, "class": "person",
                            "outputs": [{"model": "age", "topk": [("adult", 0.5), ("child", 0.25)]},
                                        {"model": "emb", "tensors": [
                                            {"name": "v", "dims": [1, 2], "data": [1.0, -2.0]}]}]}],
               "objects_dropped": 0},
    "result_v2": {"type": "result", "stream_id": 7, "seq": 42,
                  "timing": {"queue_us": 100, "detect_us": 2000, "classify_us": 3000,
                             "total_us": 5500},
                  "objects": [{"bbox": (10.0, 20.0, 30.0, 40.0), "score": 0.75, "class": 0,
                               "outputs": []}],
                  "objects_dropped": 65503},
    "result_v3": {"type": "result", "stream_id": 7, "seq": 42,
                  "timing": {"queue_us": 100, "detect_us": 0, "classify_us": 3000,
                             "total_us": 5500},
                  "objects": [{"bbox": (10.0, 20.0, 30.0, 40.0), "score": 0.75, "class": 0,
                               "track_id": 5, "box_age": 2,
                               "outputs": [{"model": "age", "topk": [("adult", 0.5)],
                                            "age": 3}]}],
                  "objects_dropped": 0},
    "dropped": {"type": "dropped", "stream_id": 7, "seq": 43, "reason": "deadline_passed"},
    "rejected": {"type": "rejected", "stream_id": 7, "seq": 44, "reason": "payload_size_mismatch",
                 "message": "bad"},
    "error": {"type": "error", "code": "unsupported_version", "closing": True,
              "message": "no common version"},
    "error_v2": {"type": "error", "code": "connection_limit", "closing": True,
                 "message": "too many connections (at most 64)"},
}


class GoldenVectors(unittest.TestCase):
    def test_every_golden_file_is_covered(self):
        on_disk = sorted(p.stem for p in GOLDEN.glob("*.hex"))
        self.assertEqual(on_disk, sorted(list(CLIENT_VECTORS) + list(SERVER_VECTORS)))

    def test_encoder_matches_golden_bytes(self):
        for name, encode in CLIENT_VECTORS.items():
            with self.subTest(name):
                self.assertEqual(encode().hex(" "), golden(name).hex(" "))

    def test_decoder_reads_golden_bytes(self):
        for name, expected in SERVER_VECTORS.items():
            with self.subTest(name):
                raw = golden(name)
                self.assertEqual(c.decode_server(raw), (expected, len(raw)))

    def test_decoder_waits_for_whole_messages(self):
        raw = golden("result")
        for cut in range(len(raw)):
            self.assertIsNone(c.decode_server(raw[:cut]))
        msg, used = c.decode_server(raw + golden("dropped"))
        self.assertEqual(used, len(raw))


class Malformed(unittest.TestCase):
    def test_bad_magic(self):
        with self.assertRaisesRegex(c.ProtocolError, "bad magic"):
            c.decode_server(b"XDNN" + golden("dropped")[4:])

    def test_unsupported_version(self):
        raw = bytearray(golden("dropped"))
        raw[4] = 9
        with self.assertRaisesRegex(c.ProtocolError, "unsupported protocol version 9"):
            c.decode_server(bytes(raw))

    def test_unknown_reason(self):
        raw = bytearray(golden("dropped"))
        raw[-1] = 99
        with self.assertRaisesRegex(c.ProtocolError, "drop_reason"):
            c.decode_server(bytes(raw))

    def test_client_message_type_from_server(self):
        with self.assertRaisesRegex(c.ProtocolError, "not a server message"):
            c.decode_server(golden("bye"))

    def test_too_large(self):
        with self.assertRaisesRegex(c.ProtocolError, "exceeds the maximum"):
            c.decode_server(golden("result"), max_message_size=10)

    def test_field_past_body(self):
        raw = bytearray(golden("rejected"))
        raw[-5] = 9  # message length 9, 3 bytes follow
        with self.assertRaisesRegex(c.ProtocolError, "`message` needs 9 bytes, 3 remain"):
            c.decode_server(bytes(raw))

    def test_version_2_codes_and_fields_are_not_read_in_version_1(self):
        raw = bytearray(golden("error_v2"))
        raw[4] = 1  # the same bytes under a version-1 header: code 10 does not exist there
        with self.assertRaisesRegex(c.ProtocolError, "error_code"):
            c.decode_server(bytes(raw))
        raw = bytearray(golden("result_v2"))
        raw[4] = 1  # objects_dropped is not part of a version-1 Result
        with self.assertRaisesRegex(c.ProtocolError, "4 trailing bytes"):
            c.decode_server(bytes(raw))

    def test_encoder_refuses_wrong_payload_size(self):
        with self.assertRaisesRegex(ValueError, "needs 18 payload bytes, got 12"):
            c.encode_frame(1, 1, 0, 3, 2, "rgb24", bytes(12))


class JpegSize(unittest.TestCase):
    def test_reads_the_start_of_frame_header(self):
        # SOI, APP0 (length 4), SOF0 (length 11): 8-bit, height 480, width 640.
        b = bytes([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x0B,
                   0x08, 0x01, 0xE0, 0x02, 0x80, 0x03, 0x01, 0x22, 0x00])
        self.assertEqual(c.jpeg_size(b), (640, 480))
        with self.assertRaisesRegex(ValueError, "not a JPEG"):
            c.jpeg_size(b"\x89PNG....")
        with self.assertRaisesRegex(ValueError, "no start-of-frame"):
            c.jpeg_size(b[:8])


class RejectReasons(unittest.TestCase):
    def test_too_large_is_read_in_version_3(self):
        raw = bytearray(golden("rejected"))
        raw[4] = 3
        raw[HEADER_REASON] = 7
        msg, _ = c.decode_server(bytes(raw))
        self.assertEqual(msg["reason"], "too_large")


# Offset of the reason byte in a Rejected message: header, stream_id (4), seq (8).
HEADER_REASON = c.HEADER_LEN + 12


if __name__ == "__main__":
    unittest.main()
