#!/usr/bin/env node
/**
 * The `tqserve` command (package.json `bin`, compiled to dist/tqserve.js by `npm run build`):
 *   tqserve serve [flags]               the HTTP server (server/main.ts; `tqserve serve --help` lists the flags)
 *   tqserve decide request.json [flags] one /v1/systemone body answered without a server (cli/decide.ts)
 * Each subcommand's module is loaded only when named, so `serve` never loads decide's and the reverse.
 */
const USAGE = `Usage:
  tqserve serve [flags]                 serve HTTP (tqserve serve --help lists the flags)
  tqserve decide request.json [flags]   answer one /v1/systemone request body without a server`;

const [command, ...rest] = process.argv.slice(2);
if (command === 'serve') {
  void import('./server/main').then((m) => m.serve(rest));
} else if (command === 'decide') {
  void import('./cli/decide').then((m) => m.decide(rest));
} else if (command === undefined || command === '--help' || command === 'help') {
  console.log(USAGE);
} else {
  console.error(`tqserve: unknown command ${JSON.stringify(command)}\n${USAGE}`);
  process.exit(2);
}
