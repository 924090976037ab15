// Loaded with `node --import` before anything else, so a Node.js too old for Ferry stops with one
// line instead of a stack trace from a dependency. Plain JavaScript that any Node.js can parse.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  process.stderr.write(
    `ferry: Node.js >= 22.12 is required, this is ${process.version} (${process.execPath}); ` +
      'run it through npm (npm start, npm test, npm run ferry), which uses the Node.js that npm install puts in node_modules\n',
  );
  process.exit(1);
}
