#!/bin/sh
# pin-gpu.sh, the target runner (`[target.x86_64-unknown-linux-gnu] runner = "./pin-gpu.sh"`
# in .cargo/config.toml): a test of the gpu group sees only the GPU of its slot.
case "$NEXTEST_TEST_GROUP_SLOT" in
  '' | *[!0-9]*) ;;
  *) export CUDA_VISIBLE_DEVICES="$NEXTEST_TEST_GROUP_SLOT" ;;
esac
exec "$@"
