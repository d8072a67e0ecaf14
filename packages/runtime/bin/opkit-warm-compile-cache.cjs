#!/usr/bin/env node
/** opkit-warm-compile-cache (src/image/warm-command.ts): needs Node 24, the operator image's Node. */
'use strict';
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  console.error(`error: opkit-warm-compile-cache needs Node 24 (the image's Node), not ${process.version}`);
  console.error(
    "next: run it with the image's Node, e.g. path/to/node24/bin/node node_modules/.bin/opkit-warm-compile-cache ...",
  );
  process.exit(1);
}
import('../src/image/warm-command.ts').then(
  ({ runWarmCommand }) => {
    process.exitCode = runWarmCommand(process.argv.slice(2), {
      out: (line) => console.log(line),
      err: (line) => console.error(line),
    });
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
