/**
 * A module beside the caller, in the form the caller runs as: `host.ts` loaded through ts-node when
 * the caller is TypeScript (the tests, the benchmarks), `host.js` when it is the compiled JavaScript
 * in dist/ (`tqserve`, `npm start`), which then starts without compiling anything.
 */
import * as path from 'path';

export function siblingModule(callerFile: string, name: string): { file: string; execArgv: string[] } {
  const typescript = callerFile.endsWith('.ts');
  return {
    file: path.join(path.dirname(callerFile), `${name}.${typescript ? 'ts' : 'js'}`),
    execArgv: typescript ? ['-r', 'ts-node/register/transpile-only'] : [],
  };
}
