#!/usr/bin/env node
// The CLI is TypeScript run without a build step: tsx compiles modules as they load.
// First, before anything that needs a newer Node.js: a Node.js too old for Ferry (a system Node 20
// running the bin directly) stops with the one-line message instead of a dependency's TypeError.
// tsx is imported only after the check, so not even its linking can fail first.
import '../scripts/check-node.mjs';

const { register } = await import('tsx/esm/api');
register();
await import('../src/cli/index.ts');
