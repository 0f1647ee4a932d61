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
NATS_SERVER_GO_VERSION=v2.10.29
