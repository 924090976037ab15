#!/usr/bin/env node
// The CLI is TypeScript run without a build step: tsx compiles modules as they load.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/index.ts');
