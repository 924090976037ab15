// `node --import ./test/helpers/record-modules.mjs ...`: writes every module URL the process resolved
// (ESM imports and CommonJS requires, node: builtins included) to the file FERRY_TEST_MODULE_LOG, one
// a line, when the process exits. Tests read it to see which modules a command loaded.
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const file = process.env.FERRY_TEST_MODULE_LOG;
if (!file) throw new Error('record-modules: set FERRY_TEST_MODULE_LOG');
const seen = new Set();
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    seen.add(resolved.url);
    return resolved;
  },
});
process.on('exit', () => writeFileSync(file, [...seen].join('\n') + '\n'));
