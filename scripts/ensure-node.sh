#!/usr/bin/env bash
# Prints the path of a directory holding a Node.js >= 22.12 binary, for the caller to put first on
# PATH: `PATH="$(bash scripts/ensure-node.sh):$PATH"`.
# Uses the `node` already on PATH when it is new enough. Otherwise installs the npm registry's
# `node` package (which ships the official binaries) into ./.tools/node with the npm at hand, which
# works with the npm that comes with Node 20. Everything but the final path goes to stderr.
set -euo pipefail

REQUIRED_MAJOR=22
REQUIRED_MINOR=12
NODE_PACKAGE="node@24"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools/node"
local_bin="$tools/node_modules/node/bin"

# True when the given node binary is at least REQUIRED_MAJOR.REQUIRED_MINOR.
new_enough() {
  local version major minor
  version="$("$1" -p 'process.versions.node' 2>/dev/null)" || return 1
  major="${version%%.*}"
  minor="${version#*.}"
  minor="${minor%%.*}"
  [[ "$major" -gt "$REQUIRED_MAJOR" ]] || { [[ "$major" -eq "$REQUIRED_MAJOR" ]] && [[ "$minor" -ge "$REQUIRED_MINOR" ]]; }
}

if command -v node >/dev/null 2>&1 && new_enough "$(command -v node)"; then
  dirname "$(command -v node)"
  exit 0
fi

if [[ -x "$local_bin/node" ]] && new_enough "$local_bin/node"; then
  echo "$local_bin"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-node: no Node.js >= $REQUIRED_MAJOR.$REQUIRED_MINOR on PATH and no npm to install one" >&2
  exit 1
fi

echo "ensure-node: installing $NODE_PACKAGE into .tools/node" >&2
mkdir -p "$tools"
# A package.json of its own keeps npm from treating the repository as the project to install into.
[[ -f "$tools/package.json" ]] || echo '{ "name": "ferry-tools-node", "private": true }' >"$tools/package.json"
npm install --prefix "$tools" --no-save --no-package-lock --no-audit --no-fund "$NODE_PACKAGE" >&2

# The package fetches its platform binary from a preinstall script. An npm that holds back install
# scripts leaves bin/ empty; run that step ourselves, with whichever node is at hand.
if [[ ! -x "$local_bin/node" && -f "$tools/node_modules/node/installArchSpecificPackage.js" ]]; then
  (cd "$tools/node_modules/node" && node installArchSpecificPackage.js) >&2
fi

if [[ -x "$local_bin/node" ]] && new_enough "$local_bin/node"; then
  echo "$local_bin"
  exit 0
fi
echo "ensure-node: installed $NODE_PACKAGE but $local_bin/node is missing or too old" >&2
exit 1
