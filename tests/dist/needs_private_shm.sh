#!/bin/sh
# Runs "$@" only where a test can give a job a /dev/shm of its own (root and
# `unshare -m` with a tmpfs mount); elsewhere exits 77, which ctest reports as
# skipped rather than passed.
if [ "$(id -u)" != 0 ] || ! unshare -m sh -c 'mount -t tmpfs -o size=64k ddp-probe /dev/shm' >/dev/null 2>&1; then
  echo "skipped: needs root and unshare -m to mount a private /dev/shm"
  exit 77
fi
exec "$@"
