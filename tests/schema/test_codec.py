"""Strict codec, the hostile side: a fuzz test that every malformed input is refused and no pickle runs
(wire compatibility and encoder limits: test_codec_wire.py)."""

import contextlib
import os
import pathlib
import pickle

import msgpack
import msgpack_numpy
import numpy as np

from ddm.schema import Frame, JobSpec, SchemaError, VelocityReply, VelocityRequest, unpackb

MESSAGES = (JobSpec, VelocityRequest, VelocityReply, Frame)


def wire(arr: np.ndarray, **override) -> dict:
    """msgpack-numpy's array map, built by hand so tests can corrupt any part of it."""
    d = {b"nd": True, b"type": arr.dtype.str, b"kind": b"", b"shape": list(arr.shape), b"data": arr.tobytes()}
    d.update({k.encode(): v for k, v in override.items()})
    return d


def raw(obj) -> bytes:
    """Plain msgpack (no validation), the way a foreign or hostile sender would write it."""
    return msgpack.packb(obj, use_bin_type=True)


# ---------------------------------------------------------------- hostile payloads


class _Touch:
    """Unpickling this creates `path`: the proof that a decoder ran attacker code."""

    def __init__(self, path):
        self.path = pathlib.Path(path)

    def __reduce__(self):
        return (pathlib.Path.touch, (self.path,))


class _System:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_payload_is_live_under_msgpack_numpy(tmp_path):
    """Control: msgpack-numpy 0.4.8 itself runs the payload, so the refusal tests below mean something."""
    marker = tmp_path / "control"
    data = raw(wire(np.zeros(1, np.float32), type=[["", "|O"]], kind=b"O", data=pickle.dumps(_Touch(marker))))
    msgpack_numpy.unpackb(data)
    assert marker.exists()


def hostile_inputs(marker: pathlib.Path):
    """(label, bytes) pairs that try to get a pickle run or an object array built."""
    f4 = np.zeros(4, np.float32)
    for name, payload in (("touch", _Touch(marker)), ("system", _System(marker))):
        evil = pickle.dumps(payload)
        headers = {
            f"kind O {name}": wire(f4, type=[["", "|O"]], kind=b"O", data=evil),
            f"kind O str-type {name}": wire(f4, type="|O", kind=b"O", data=evil),
            f"kind V {name}": wire(f4, type=[["a", "|O"]], kind=b"V", data=evil),
            f"dtype |O kind '' {name}": wire(
                f4, type="|O", shape=[len(evil) // 8], data=evil[: len(evil) // 8 * 8]
            ),
            f"scalar |O {name}": {b"nd": False, b"type": "|O", b"data": evil[:8]},
        }
        for label, header in headers.items():
            yield label, raw(header)
            yield label + " in list", raw([1, header])
            yield label + " as VelocityRequest.x", raw(request_map(x=header))
    yield "dtype |O pointer bytes", raw(wire(f4, type="|O", shape=[2], data=b"\x41" * 16))


# ---------------------------------------------------------------- valid maps to corrupt


def message_map(type_: str, fields: dict, override: dict) -> dict:
    """A valid message's wire map, written by hand (not by the encoder): header, fields, overrides."""
    return {"type": type_, "version": 1, **fields, **override}


def request_map(B=1, **override) -> dict:
    fields = {
        "request_id": "req-1",
        "x": wire(np.zeros((B, 1, 32, 32), np.float32)),
        "t": wire(np.full(B, 0.5, np.float32)),
        "y": wire(np.arange(B, dtype=np.int64) % 11),
        "guidance": wire(np.ones(B, np.float32)),
    }
    return message_map("velocity_request", fields, override)


def reply_map(**override) -> dict:
    fields = {"request_id": "req-1", "v": wire(np.zeros((1, 1, 32, 32), np.float32)), "expert_id": 0}
    fields |= {"worker_id": "host-1", "compute_ms": 1.0, "batch_size": 4}
    return message_map("velocity_reply", fields, override)


def frame_map(**override) -> dict:
    fields = {"job_id": "job1", "step": 1, "t": 0.02, "x": wire(np.zeros((2, 1, 32, 32), np.float16))}
    fields |= {"experts": [0, 1], "weights": wire(np.full((2, 2), 0.5, np.float32))}
    fields |= {"latency_ms": 3.0, "compute_ms": 2.0}
    return message_map("frame", fields, override)


def spec_map(**override) -> dict:
    fields = {"job_id": "job1", "labels": [1, 7], "steps": 10, "strategy": "top1", "guidance": 2.0, "seed": 3}
    return message_map("job_spec", fields, override)


def without(m: dict, key: str) -> dict:
    return {k: v for k, v in m.items() if k != key}


def valid_messages():
    return [
        JobSpec("job1", (1, 7), 10, "topk:2", 2.0, 3),
        VelocityRequest(
            "req-1",
            np.zeros((1, 1, 32, 32), np.float32),
            np.zeros(1, np.float32),
            np.zeros(1, np.int64),
            np.ones(1, np.float32),
        ),
        VelocityReply("req-1", np.zeros((1, 1, 32, 32), np.float32), 1, "host-1", 2.5, 8),
        Frame.from_latent(
            "job1", 0, 0.0, np.zeros((1, 1, 32, 32), np.float32), [1], np.eye(1, 2, 1, np.float32), 0.5
        ),
    ]


def test_valid_maps_decode():
    """The corruption sources below are valid, so each refusal is caused by its one corruption."""
    VelocityRequest.decode(raw(request_map(B=3)))
    VelocityReply.decode(raw(reply_map()))
    Frame.decode(raw(frame_map()))
    JobSpec.decode(raw(spec_map()))


def malformed_messages():
    """(label, message class, bytes): each is wrong in exactly one way."""
    f4 = np.zeros((1, 1, 32, 32), np.float32)
    bad_arrays = {
        "shape/bytes mismatch": wire(f4, shape=[1, 1, 32, 31]),
        "bytes too long": wire(f4, data=f4.tobytes() + b"\0"),
        "huge shape 2**31 x 2**31": wire(f4, shape=[2**31, 2**31]),
        "huge shape 2**63": wire(f4, shape=[2**63]),
        "huge shape 5 dims": wire(f4, shape=[1, 1, 1, 32, 32]),
        "negative dim": wire(f4, shape=[-1, 1, 32, 32]),
        "bool dim": wire(f4, shape=[True, 1, 32, 32]),
        "float dim": wire(f4, shape=[1.0, 1, 32, 32]),
        "shape not list": wire(f4, shape=1024),
        "big-endian": wire(f4.astype(">f4")),
        "float64 type": wire(f4.astype(np.float64)),
        "dtype bytes": wire(f4, type=b"<f4"),
        "dtype garbage": wire(f4, type="not a dtype"),
        "dtype structured": wire(f4, type=[["a", "<f4"]]),
        "kind V": wire(f4, kind=b"V"),
        "kind str": wire(f4, kind=""),
        "nd 1": wire(f4, nd=1),
        "nd str": wire(f4, nd="yes"),
        "data str": wire(f4, data="x" * 4096),
        "data list": wire(f4, data=[0] * 4096),
        "extra key": {**wire(f4), b"extra": 1},
        "missing kind": without(wire(f4), b"kind"),
        "missing data": without(wire(f4), b"data"),
    }
    for label, arr in bad_arrays.items():
        yield f"x {label}", VelocityRequest, raw(request_map(x=arr))
    yield "bool bytes 2", VelocityRequest, raw([wire(np.zeros(3, bool), data=b"\x00\x02\x01")])

    nan_x = np.zeros((1, 1, 32, 32), np.float32)
    nan_x[0, 0, 5, 5] = np.nan
    inf_x = np.zeros((1, 1, 32, 32), np.float32)
    inf_x[0, 0, 0, 0] = -np.inf
    for name, a in (("nan", nan_x), ("inf", inf_x)):
        yield f"request x {name}", VelocityRequest, raw(request_map(x=wire(a)))
        yield f"reply v {name}", VelocityReply, raw(reply_map(v=wire(a)))
        yield f"frame x {name}", Frame, raw(frame_map(x=wire(np.concatenate([a, a]).astype(np.float16))))
        yield (
            f"frame weights {name}",
            Frame,
            raw(frame_map(weights=wire(np.full((2, 2), a.sum(), np.float32)))),
        )
        yield f"request t {name}", VelocityRequest, raw(request_map(t=wire(np.array([a.sum()], np.float32))))
        yield (
            f"request guidance {name}",
            VelocityRequest,
            raw(request_map(guidance=wire(np.array([a.sum()], np.float32)))),
        )
    yield (
        "frame x float16 overflow",
        Frame,
        raw(frame_map(x=wire(np.full((2, 1, 32, 32), np.inf, np.float16)))),
    )

    B2 = request_map(B=2)
    request_bad = {
        "x float64": wire(np.zeros((1, 1, 32, 32))),
        "x float16": wire(np.zeros((1, 1, 32, 32), np.float16)),
        "y int32": wire(np.zeros(1, np.int32)),
        "y float32": wire(np.zeros(1, np.float32)),
        "t float16": wire(np.zeros(1, np.float16)),
        "guidance int64": wire(np.ones(1, np.int64)),
        "x rank 3": wire(np.zeros((1, 32, 32), np.float32)),
        "x rank 2": wire(np.zeros((32, 32), np.float32)),
        # another sample space (3 channels, 28x28) decodes: the receiver checks it against its own
        # (tests/schema/test_messages.py test_the_receiver_checks_the_sample_space)
        "x 0 channels": wire(np.zeros((1, 0, 32, 32), np.float32)),
        "x 0x0": wire(np.zeros((1, 1, 0, 0), np.float32)),
        "t rank 2": wire(np.zeros((1, 1), np.float32)),
        "t scalar": 0.5,
        "t batch 2": B2["t"],
        "y batch 2": B2["y"],
        "guidance batch 2": B2["guidance"],
        "x batch 0": wire(np.zeros((0, 1, 32, 32), np.float32)),
        "t 1.5": wire(np.array([1.5], np.float32)),
        "t -0.1": wire(np.array([-0.1], np.float32)),
        "y 100001": wire(np.array([100_001], np.int64)),  # past MAX_CLASSES (the space bounds it more)
        "y -1": wire(np.array([-1], np.int64)),
        "request_id empty": "",
        "request_id newline": "req\n",
        "request_id space": "r 1",
        "request_id bytes": b"req-1",
        "request_id long": "r" * 129,
        "request_id int": 7,
    }
    for label, value in request_bad.items():
        field = label.split()[0]
        yield f"request {label}", VelocityRequest, raw(request_map(**{field: value}))
    yield "request batch 257", VelocityRequest, raw(request_map(B=257))

    reply_bad = {
        "v float64": wire(np.zeros((1, 1, 32, 32))),
        "v rank 3": wire(np.zeros((1, 32, 32), np.float32)),
        "expert_id -1": -1,
        "expert_id bool": True,
        "expert_id float": 1.0,
        "expert_id huge": 2**40,
        "worker_id empty": "",
        "worker_id slash": "a/b",
        "compute_ms -1": -1.0,
        "compute_ms nan": float("nan"),
        "compute_ms str": "1",
        "batch_size 0": 0,
        "batch_size none": None,
    }
    for label, value in reply_bad.items():
        yield f"reply {label}", VelocityReply, raw(reply_map(**{label.split()[0]: value}))

    frame_bad = {
        "x float32": wire(np.zeros((2, 1, 32, 32), np.float32)),
        "x rank 3": wire(np.zeros((2, 32, 32), np.float16)),
        "weights float16": wire(np.full((2, 2), 0.5, np.float16)),
        "weights batch 3": wire(np.full((3, 2), 0.5, np.float32)),
        "weights rank 1": wire(np.full(2, 0.5, np.float32)),
        "weights K 0": wire(np.zeros((2, 0), np.float32)),
        "weights negative": wire(np.full((2, 2), -0.5, np.float32)),
        "experts out of range": [0, 2],
        "experts duplicate": [1, 1],
        "experts negative": [-1],
        "experts not list": 1,
        "experts strings": ["0"],
        "step -1": -1,
        "step 1001": 1001,
        "t 2": 2.0,
        "t nan": float("nan"),
        "job_id dot": "a.b",
        "job_id long": "j" * 65,
        "latency_ms inf": float("inf"),
        "compute_ms -1": -1.0,
    }
    for label, value in frame_bad.items():
        yield f"frame {label}", Frame, raw(frame_map(**{label.split()[0]: value}))

    spec_bad = {
        "labels empty": [],
        "labels 100001": [100_001],  # past MAX_CLASSES (the deployment's space bounds it more)
        "labels -1": [-1],
        "labels 65": [1] * 65,
        "labels bool": [True],
        "labels float": [1.0],
        "labels str": "17",
        "steps 0": 0,
        "steps 1001": 1001,
        "steps float": 10.0,
        "strategy top2": "top2",
        "strategy topk:0": "topk:0",
        "strategy topk:": "topk:",
        "strategy topk:-1": "topk:-1",
        "strategy topk:01": "topk:01",
        "strategy ORACLE": "ORACLE",
        "strategy int": 1,
        "guidance 21": 21.0,
        "guidance -1": -1.0,
        "guidance nan": float("nan"),
        "guidance inf": float("inf"),
        "guidance str": "1.5",
        "seed -1": -1,
        "seed 2**32": 2**32,
        "job_id empty": "",
        "job_id space": "a b",
        "job_id unicode": "jöb",
    }
    for label, value in spec_bad.items():
        yield f"spec {label}", JobSpec, raw(spec_map(**{label.split()[0]: value}))
    yield from numpy_numbers()

    # envelope: every message type
    for cls, make in (
        (VelocityRequest, request_map),
        (VelocityReply, reply_map),
        (Frame, frame_map),
        (JobSpec, spec_map),
    ):
        m = make()
        name = cls.__name__
        yield f"{name} extra field", cls, raw({**m, "extra": 1})
        for key in m:
            yield f"{name} missing {key}", cls, raw(without(m, key))
        yield f"{name} wrong type tag", cls, raw({**m, "type": "frame" if cls is not Frame else "job_spec"})
        yield f"{name} version 2", cls, raw({**m, "version": 2})
        yield f"{name} version 0", cls, raw({**m, "version": 0})
        yield f"{name} version True", cls, raw({**m, "version": True})
        yield f"{name} version '1'", cls, raw({**m, "version": "1"})
        yield f"{name} version 1.0", cls, raw({**m, "version": 1.0})
        yield f"{name} bytes keys", cls, raw({k.encode(): v for k, v in m.items()})
        yield f"{name} as list", cls, raw(list(m.values()))
        yield f"{name} nil", cls, raw(None)
        yield f"{name} trailing data", cls, raw(m) + b"\x00"
        yield f"{name} two messages", cls, raw(m) + raw(m)
        yield f"{name} duplicate key", cls, duplicate_key_map(m)
        yield f"{name} ext type", cls, raw({**m, "version": msgpack.ExtType(1, b"x")})
        yield f"{name} timestamp", cls, raw({**m, "version": msgpack.Timestamp(1)})
        yield f"{name} deep nesting", cls, b"\x91" * 100_000
        yield f"{name} bad utf-8", cls, raw({**m, "type": b"\xff"}).replace(b"\xc4\x01\xff", b"\xa1\xff")


def numpy_numbers():
    """numpy numbers where PROTOCOL.md 4.1 says msgpack ints and floats. msgpack-numpy writes np.int64(3)
    as the map {b"nd": False, b"type": "<i8", b"data": ...} (and a 0-d array as an array map); a field
    check built on numbers.Integral / numbers.Real would take either, so decoding refuses them."""
    cases = [
        (JobSpec, spec_map, "steps", np.int64(10)),
        (JobSpec, spec_map, "steps", np.bool_(True)),
        (JobSpec, spec_map, "seed", np.uint8(3)),
        (JobSpec, spec_map, "guidance", np.float32(2.0)),
        (JobSpec, spec_map, "labels", [np.int64(1), 7]),
        (VelocityReply, reply_map, "expert_id", np.int32(0)),
        (VelocityReply, reply_map, "batch_size", np.int64(4)),
        (VelocityReply, reply_map, "batch_size", np.array(4)),
        (VelocityReply, reply_map, "compute_ms", np.float32(1.0)),
        (Frame, frame_map, "step", np.int64(1)),
        (Frame, frame_map, "step", np.array(1, np.int32)),
        (Frame, frame_map, "t", np.float16(0.5)),
        (Frame, frame_map, "latency_ms", np.float32(3.0)),
        (Frame, frame_map, "experts", [np.int32(0), 1]),
    ]
    for cls, make, field, value in cases:
        data = msgpack_numpy.packb(make(**{field: value}))  # what a msgpack-numpy sender writes
        yield f"{cls.__name__} {field} as numpy {value!r}", cls, data


def duplicate_key_map(m: dict) -> bytes:
    """A valid-looking map whose "type" key appears twice (dict() would silently keep the last)."""
    body = b"".join(raw(k) + raw(v) for k, v in m.items())
    n = len(m) + 1
    return bytes([0x80 | n]) + raw("type") + raw("frame") + body


# ---------------------------------------------------------------- the fuzz test


def test_fuzz_every_malformed_input_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    calls = []

    def tripwire(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the decoder called pickle")

    # Any pickle call during decoding trips this, whichever code path would make it.
    for name in ("loads", "load", "Unpickler", "_loads", "_load", "_Unpickler"):
        if hasattr(pickle, name):
            monkeypatch.setattr(pickle, name, tripwire)

    cases: list[tuple[str, type, bytes]] = []
    for label, data in hostile_inputs(marker):
        cases += [(f"hostile {label}", cls, data) for cls in MESSAGES]
    cases += list(malformed_messages())
    for msg in valid_messages():
        enc = msg.encode()
        type(msg).decode(enc)  # the whole encoding is valid ...
        cases += [
            (f"{type(msg).__name__} cut at {n}", type(msg), enc[:n]) for n in range(len(enc))
        ]  # ... no prefix is
        for other in MESSAGES:
            if other is not type(msg):
                cases.append((f"{type(msg).__name__} decoded as {other.__name__}", other, enc))
    for seed in range(400):
        rng = np.random.default_rng(seed)
        blob = rng.bytes(int(rng.integers(0, 300)))
        cases += [(f"random seed {seed}", cls, blob) for cls in MESSAGES]
        cases += [(f"random map seed {seed}", cls, b"\x87" + blob) for cls in MESSAGES]

    escaped = []
    for label, cls, data in cases:
        try:
            cls.decode(data)
        except SchemaError as e:
            assert str(e).startswith("expected "), (label, str(e))
        except Exception as e:  # any other exception is a finding too
            escaped.append((label, f"{type(e).__name__}: {e}"))
        else:
            escaped.append((label, "accepted"))

    assert not calls, "pickle was called while decoding"
    assert not marker.exists(), "a pickle payload ran"
    assert not escaped, escaped[:20]
    print(f"fuzz: {len(cases)} malformed inputs, all refused")


def test_codec_only_raises_schema_error_on_random_and_mutated_bytes():
    """unpackb on arbitrary bytes either decodes or raises SchemaError; flipped bytes in valid
    messages either decode to a valid message (e.g. a changed pixel) or are refused."""
    for seed in range(300):
        rng = np.random.default_rng(seed)
        with contextlib.suppress(SchemaError):
            unpackb(rng.bytes(int(rng.integers(0, 200))))
    rng = np.random.default_rng(1)
    for msg in valid_messages():
        enc = bytearray(msg.encode())
        for _ in range(300):
            mutated = bytearray(enc)
            for i in rng.integers(0, len(enc), size=int(rng.integers(1, 4))):
                mutated[i] = int(rng.integers(0, 256))
            with contextlib.suppress(SchemaError):
                type(msg).decode(bytes(mutated))
