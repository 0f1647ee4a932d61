#!/usr/bin/env python3
"""A reference rollout worker for rlloop, in Python (nats-py and jsonschema from PyPI).

What a real worker next to vLLM does, with the policy's sampling replaced by random codes:
  - it follows the adapter announcements (rlloop.<policy>.adapter.published and .adapter.rolled_back) to know which
    adapter to sample from next (a real worker asks vLLM for that adapter's versioned name, <policy>-r<round>);
  - it builds one RolloutCompleted per episode, validates it against schema/rollout-completed.schema.json (the
    daemon's own schema, generated from src/contract) and refuses to send one that does not validate;
  - it publishes on rlloop.<policy>.rollouts with the message id set to the rollout id, so a retried publish is
    stored once;
  - frames go inline (png_base64) or, with --frames-dir (a folder under one of the daemon's frames.roots), by path.

    python examples/rollout_worker.py --nats nats://127.0.0.1:4222 --policy bt --code-length 6 --count 64

Each published rollout is printed as one JSON line {"id", "seq", "adapter_round"}. --send-invalid also publishes one
rollout that breaks the schema (a positive vllm_logp), to see the daemon reject it with the reason the schema
predicts; the line printed for it carries "invalid" with the validator's message.
"""
import argparse
import asyncio
import base64
import json
import random
import struct
import sys
import uuid
import zlib
from pathlib import Path

import jsonschema
import nats
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema" / "rollout-completed.schema.json"


def png(width: int, height: int, rgb: tuple) -> bytes:
    """A solid-colour 8-bit RGB PNG (the standard library is enough; a real worker has its camera frame)."""
    row = b"\x00" + bytes(rgb) * width
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b"")


class AdapterFollower:
    """The adapter to sample from: the one the daemon's latest adapter announcement names.

    Two kinds of announcement say which adapter to serve, on rlloop.<policy>.adapter.*: adapter.published (a new
    round's adapter) and adapter.rolled_back (an earlier adapter to serve again, after a regression on the robots or
    an operator's `rlloop rollback`). The latest of them, in stream order, wins; rounds can go down.
    Round 0, the initial adapter, until one is announced.
    """

    STREAM = "RLLOOP_EVENTS"

    def __init__(self, policy: str):
        self.policy = policy
        self.current = {"round": 0, "name": f"{policy}-r0"}
        self.seq = 0
        self.announced = asyncio.Event()

    async def follow(self, js) -> None:
        # where things stand now, read before returning (no race with the first rollout), then every later one
        for kind in ("published", "rolled_back"):
            try:
                last = await js.get_last_msg(self.STREAM, f"rlloop.{self.policy}.adapter.{kind}")
            except NotFoundError:
                continue
            self._take(last.seq, json.loads(last.data))
        subject = f"rlloop.{self.policy}.adapter.*"
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self.seq + 1, filter_subject=subject)
        await js.subscribe(subject, cb=self._on_announcement, ordered_consumer=True, config=config, stream=self.STREAM)

    async def _on_announcement(self, msg) -> None:
        self._take(msg.metadata.sequence.stream, json.loads(msg.data))

    def _take(self, seq: int, event: dict) -> None:
        if seq <= self.seq:
            return
        self.seq = seq
        self.current = {"round": event["round"], "name": event["name"], "sha256": event["sha256"]}
        self.announced.set()


def rollout(policy: str, adapter: dict, code_length: int, rng: random.Random, frames_dir, steps: int) -> dict:
    """One episode: `steps` decisions on a camera frame, each with its sampled code and vLLM's log-prob."""
    episode_steps = []
    for t in range(steps):
        frame = png(96, 64, (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        if frames_dir is None:
            image = {"png_base64": base64.b64encode(frame).decode()}
        else:
            path = Path(frames_dir) / f"{uuid.uuid4().hex}.png"
            path.write_bytes(frame)
            image = {"path": str(path)}
        episode_steps.append({
            "image": image,
            "name": rng.choice(["red cup", "blue block", "drawer"]),
            "code": "".join(str(rng.randrange(10)) for _ in range(code_length)),
            "vllm_logp": -rng.uniform(0.5, 8.0),
            "memory": ["01", "10"],
        })
    return {
        "id": f"py-{uuid.uuid4().hex}",
        "policy": policy,
        "adapter": adapter,
        "group": f"scene-{rng.randrange(4)}",
        "reward": round(rng.random(), 4),
        "steps": episode_steps,
    }


async def publish(js, event: dict) -> int:
    ack = await js.publish(f"rlloop.{event['policy']}.rollouts", json.dumps(event).encode(), headers={"Nats-Msg-Id": event["id"]})
    return ack.seq


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nats", default="nats://127.0.0.1:4222", help="NATS server URL")
    parser.add_argument("--policy", default="bt", help="the daemon's policy.name")
    parser.add_argument("--code-length", type=int, default=6, help="the daemon's policy.codeLength")
    parser.add_argument("--count", type=int, default=8, help="rollouts to publish")
    parser.add_argument("--steps", type=int, default=2, help="decisions per rollout")
    parser.add_argument("--frames-dir", default=None, help="write frames here and send them by path (under frames.roots)")
    parser.add_argument("--wait-round", type=int, default=None, help="before publishing, wait until the adapter to serve is this round's")
    parser.add_argument("--send-invalid", action="store_true", help="also publish one rollout that breaks the schema")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    rng = random.Random(args.seed)
    nc = await nats.connect(args.nats)
    js = nc.jetstream()
    follower = AdapterFollower(args.policy)
    await follower.follow(js)
    if args.wait_round is not None:
        while follower.current["round"] != args.wait_round:
            follower.announced.clear()
            await asyncio.wait_for(follower.announced.wait(), timeout=600)
    for _ in range(args.count):
        event = rollout(args.policy, follower.current, args.code_length, rng, args.frames_dir, args.steps)
        errors = sorted(validator.iter_errors(event), key=lambda e: list(e.path))
        if errors:
            print(json.dumps({"id": event["id"], "refused": errors[0].message}), flush=True)
            continue
        print(json.dumps({"id": event["id"], "seq": await publish(js, event), "adapter_round": follower.current["round"]}), flush=True)
    if args.send_invalid:
        event = rollout(args.policy, follower.current, args.code_length, rng, None, 1)
        event["steps"][0]["vllm_logp"] = 0.5  # a log-probability above 0: the schema's maximum is 0
        error = next(validator.iter_errors(event))
        print(json.dumps({"id": event["id"], "seq": await publish(js, event), "invalid": error.message,
                          "path": ".".join(str(p) for p in error.absolute_path)}), flush=True)
    await nc.drain()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
