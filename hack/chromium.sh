#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium, installing Debian's
# chromium package first when it is missing (the e2e test of
# /debug/controllers renders the page with it). Exits non-zero when it
# can neither find nor install one.
set -euo pipefail

find_chromium() {
	for c in chromium chromium-browser google-chrome; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if find_chromium; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium not found and apt-get is not available to install it" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "chromium not found; installing it needs root or sudo" >&2
		exit 1
	fi
	sudo="sudo -n"
fi
echo "installing chromium (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2 || true
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
find_chromium
